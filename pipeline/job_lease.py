"""The lease of a job that runs without its launcher (a refresh launched from a template): the job
holds its output's lease itself, as a launcher that waits holds it for its job (pipeline.lease).

The job's first step takes it (`started`), and every step that writes follows that step's one
element, so a job that finds another live run holding the output fails, in one line naming the
output and the holder, having written nothing. The worker process that took it renews it (every
third of `seconds`) for as long as it names the run. The step after the publish step releases it
(`released`); the publish step itself when it fails the job with the run's outcome (rejected,
held: pipeline.publish.JobOutcome). A job that fails otherwise, or is killed, stops renewing:
its lease goes stale after `seconds`, and the next run takes it over, as after a killed launcher.
A runner may run the first step again (a retried bundle): a lease that names the run already is
its own.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
import time

import apache_beam as beam

from core import storage
from core.contract.layout import join
from pipeline.lease import LEASE_NAME, Holder, Lease, LeaseHeldError

_LOG = logging.getLogger(__name__)
_RENEWERS: dict[tuple[str, str], threading.Thread] = {}  # (lease path, run): this process's renewer
_RENEWERS_LOCK = threading.Lock()
_RELEASE_TRIES = 5  # a renewal by another worker may change the lease between its read and the delete


@dataclasses.dataclass(frozen=True)
class JobLease:
    """The lease on `folder` that the job of run `run` takes, renews and releases itself."""

    folder: str
    run: str
    seconds: int

    @property
    def path(self) -> str:
        return join(self.folder, LEASE_NAME)

    def take(self) -> None:
        """Takes the lease (over a stale one, with a warning), or finds it this run's already, and
        renews it from this process; LeaseHeldError when another live run holds it."""
        if self._holder() is None:
            try:
                Lease(self.folder, self.run, self.seconds).acquire()
            except LeaseHeldError as e:
                raise LeaseHeldError(f"job of run {self.run} stopped before writing into {self.folder}: {e}") from None
        self._keep_renewed()

    def renew(self) -> bool:
        """Extends the lease while it names the run; False once it does not (released, or taken over)."""
        current = self._holder()
        if current is None:
            return False
        mine = Holder.this_process(self.run, datetime.datetime.now(datetime.timezone.utc), self.seconds)
        # Refused when another worker of the job renewed it first, or another run took it over
        # since the read: the next renewal tells which.
        storage.replace_if_unchanged(self.path, mine.to_bytes(), current[1], self.seconds)
        return True

    def release(self) -> None:
        """Deletes the lease if it names the run (left alone when another run has taken it over)."""
        for _ in range(_RELEASE_TRIES):
            current = self._holder()
            if current is None or storage.delete_if_unchanged(self.path, current[1], self.seconds):
                return
        _LOG.warning("could not release %s: it kept changing; it goes stale after %d s", self.path, self.seconds)

    def _holder(self) -> tuple[Holder, str] | None:
        """The lease's holder and token when it names the run."""
        current = storage.read_with_token(self.path)
        holder = Holder.from_bytes(current[0]) if current else None
        return (holder, current[1]) if holder is not None and holder.run == self.run else None

    def _keep_renewed(self) -> None:
        """Starts this process's renewer of the lease, unless one runs."""
        key = (self.path, self.run)
        with _RENEWERS_LOCK:
            if key in _RENEWERS and _RENEWERS[key].is_alive():
                return
            _RENEWERS[key] = threading.Thread(target=self._renew_while_held, name="job-lease-renewer", daemon=True)
            _RENEWERS[key].start()

    def _renew_while_held(self) -> None:
        """Renews until the lease no longer names the run, or could not be renewed for `seconds`
        (then another run may have taken it over: the job's fence tells)."""
        renewed = time.monotonic()
        while time.monotonic() - renewed < self.seconds:
            time.sleep(self.seconds / 3)
            try:
                if not self.renew():
                    _LOG.info("%s no longer names run %s (released or taken over): renewals stop", self.path, self.run)
                    return
                renewed = time.monotonic()
            except Exception:  # tried again while the lease lasts
                _LOG.exception("could not renew %s", self.path)
        _LOG.error("could not renew %s for %d s: another run may take it over", self.path, self.seconds)


def _take(element, lease: JobLease):
    lease.take()
    return element


def _release(element, lease: JobLease):
    lease.release()
    return element


def released(published: beam.PCollection, lease: JobLease) -> None:
    """Releases `lease` once the publish step is done: in a stage of its own, after the publish
    step's has ended, however often the runner ran that step's bundle."""
    _ = published | "AfterPublishing" >> beam.Reshuffle() | "ReleaseLease" >> beam.Map(_release, lease)


def started(p: beam.Pipeline, lease: JobLease | None) -> beam.PCollection:
    """The job's one start element, which every source step follows: given once the job holds
    `lease`, when it takes one."""
    start = p | "Start" >> beam.Impulse()
    return start if lease is None else start | "TakeLease" >> beam.Map(_take, lease)
