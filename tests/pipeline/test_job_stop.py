"""pipeline.runners.stop_local_run leans on one Beam internal, the lean runner's executor threads
(direct_runner_threads): this fails if Beam moves them, and checks that a stopped run's threads
end at the next check (transforms.stopping) without finishing the job."""

from __future__ import annotations

import threading
import time

import apache_beam as beam
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner

from pipeline.runners import direct_runner_threads, stop_local_run
from transforms import stopping

_SEEN: list[int] = []


class _SlowCount(beam.DoFn):
    """Checks for a stop between elements, as the pipeline's long-running DoFns do."""

    def process(self, element):
        stopping.check()
        time.sleep(0.05)
        _SEEN.append(element)
        yield element


def test_the_lean_runners_threads_are_found_and_stop_at_the_next_check():
    _SEEN.clear()
    stopping.reset()
    p = beam.Pipeline(runner=BundleBasedDirectRunner())
    _ = p | beam.Create(range(200), reshuffle=False) | beam.ParDo(_SlowCount())
    result = p.run()
    try:
        threads = direct_runner_threads(result)
        assert threads and all(isinstance(t, threading.Thread) for t in threads)
        assert any(t.is_alive() for t in threads)
        while not _SEEN:  # the bundle is under way
            time.sleep(0.01)
        started = time.monotonic()
        assert stop_local_run(result)
        assert time.monotonic() - started < 2 and not any(t.is_alive() for t in threads)
        assert len(_SEEN) < 200  # stopped, not finished
    finally:
        stopping.reset()


def test_a_result_of_no_local_run_has_no_threads():
    assert direct_runner_threads(None) == []
    assert stop_local_run(None)
    stopping.reset()
