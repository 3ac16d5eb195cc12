"""pipeline.runners.stop_local_run leans on Beam internals, the lean runner's executor threads
(direct_runner_threads) and the threads of the FnApiRunner's in-process workers
(fn_api_worker_threads): this fails if Beam moves them, and checks that a stopped run's threads
end at the next check (transforms.stopping) without finishing the job."""

from __future__ import annotations

import signal
import threading
import time

import apache_beam as beam
import pytest
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner

from pipeline.runners import (
    direct_runner_threads,
    interrupts_stop_the_run,
    make_pipeline,
    pipeline_options,
    stop_local_run,
)
from transforms import stopping

_SEEN: list[int] = []


class _SlowCount(beam.DoFn):
    """Checks for a stop between elements, as the pipeline's long-running DoFns do."""

    def process(self, element):
        stopping.check()
        time.sleep(0.05)
        _SEEN.append(element)
        yield element


@pytest.fixture
def default_sigint():
    """Ctrl-C as in a terminal, also where the suite runs with SIGINT ignored (a background job)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


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
        assert stop_local_run(result, p.options)
        assert time.monotonic() - started < 2 and not any(t.is_alive() for t in threads)
        assert len(_SEEN) < 200  # stopped, not finished
    finally:
        stopping.reset()


def _ctrl_c() -> None:
    """SIGINT to the main thread, which wakes it from a wait (as _thread.interrupt_main does not)."""
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


def _ctrl_c_once_counting() -> None:
    while not _SEEN:
        time.sleep(0.01)
    _ctrl_c()


def test_the_parallel_runners_workers_are_found_and_stop_before_it_returns(default_sigint):
    """The FnApiRunner runs the job inside run(), on the main thread, and its workers' threads go
    on after an interrupt there: stop_local_run must wait for them (nothing counts after it)."""
    _SEEN.clear()
    stopping.reset()
    options = pipeline_options(["--direct_num_workers", "2"])
    p = make_pipeline(options)
    _ = p | beam.Create(range(200)) | beam.ParDo(_SlowCount())  # Create's reshuffle: 2 parts
    threading.Thread(target=_ctrl_c_once_counting, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            p.run()
        started = time.monotonic()
        assert stop_local_run(None, options)
        assert time.monotonic() - started < 2
        counted = len(_SEEN)
        time.sleep(0.3)
        assert len(_SEEN) == counted < 200, "a worker went on after stop_local_run"
    finally:
        stopping.reset()


def test_an_interrupt_raises_the_stop_flag_before_it_unwinds(default_sigint):
    """So that the DoFns Beam's clean-up tears down under the FnApiRunner's workers stop quietly."""
    stopping.reset()
    try:
        with pytest.raises(KeyboardInterrupt), interrupts_stop_the_run():
            try:
                _ctrl_c()
                time.sleep(5)
            finally:
                with pytest.raises(stopping.Stopped):
                    stopping.check()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        stopping.reset()


def test_a_result_of_no_local_run_has_no_threads():
    assert direct_runner_threads(None) == []
    assert stop_local_run(None, pipeline_options([]))
    stopping.reset()
