"""One run at a time per output: a lease file (`OUTPUT/.lease`) created only if absent, holding
the run, its host and process, when it started and when the lease expires. The launcher renews it
while the run lives (a job nobody waits for holds it itself: pipeline.job_lease); a lease whose
expiry has passed, or whose process is gone from this host, is stale and is taken over with a
warning (the caller then removes what that run left behind).
How long a lease lasts is the `lease_seconds` setting: a run stalled longer than that (a suspended
laptop or VM) may be taken over.

Creation, renewal and release are conditional writes (core.storage): GCS preconditions on the
object generation, `O_EXCL` and an flock locally.

A lease is only as good as the check before each write that matters (fencing): a run touches the
names of a committed dataset only inside `Fence`, which proves the lease still names the run, and
keeps that proof true for the writes it makes: locally by holding the folder's flock, which a
takeover must take too; on GCS by making each write a compose that names the lease object at the
generation the run holds, which GCS refuses once another run has taken the lease. A run that
cannot prove it raises LeaseLost and touches nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from core import storage
from core.contract import json_text
from core.contract.layout import is_remote, join
from core.evidence import Evidence, MadeFolders

_LOG = logging.getLogger(__name__)

LEASE_NAME = ".lease"
LEASE_SECONDS = 300  # a live run renews every third of this
LEASE_BYTES = 4096  # what a lease file may hold: a run writes about 200 bytes of JSON


class LeaseHeldError(RuntimeError):
    """Another live run holds the output."""


class LeaseLost(RuntimeError):
    """This run no longer holds its output's lease (it stalled past it and another run took it
    over): it must not touch the dataset, so it stops."""


class Unfinished(KeyboardInterrupt):
    """An interrupt that stopped a run before it removed what it wrote (a second Ctrl-C, or a
    SIGTERM, during its clean-up). Raised through the run's `with Lease`, it leaves the lease in place: once this
    process is gone the lease is stale, and the next run takes it over and removes what is left,
    as after a killed run."""


@dataclasses.dataclass(frozen=True)
class Holder:
    run: str
    host: str
    pid: int
    started: str
    expires: str

    @classmethod
    def this_process(cls, run: str, now: datetime.datetime, seconds: int) -> Holder:
        return cls(run, socket.gethostname(), os.getpid(), _iso(now), _iso(now + datetime.timedelta(seconds=seconds)))

    def to_bytes(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Holder | None:
        """None for a lease file that is not a lease a run wrote (treated as stale): not JSON of at
        most LEASE_BYTES, or without its fields as a run writes them (text, a process id, times
        with their time zone)."""
        try:
            holder = cls(**json_text.loads(data, LEASE_BYTES))
            times = [datetime.datetime.fromisoformat(moment) for moment in (holder.started, holder.expires)]
        except (ValueError, TypeError):  # not JSON (NotJson), other fields, times that are none
            return None
        named = isinstance(holder.run, str) and isinstance(holder.host, str)
        process = type(holder.pid) is int and 0 < holder.pid < 2**31
        return holder if named and process and all(moment.tzinfo for moment in times) else None

    def is_stale(self, now: datetime.datetime) -> bool:
        if datetime.datetime.fromisoformat(self.expires) < now:
            return True
        return self.host == socket.gethostname() and not _process_alive(self.pid)

    def describe(self) -> str:
        return f"run {self.run} (host {self.host}, pid {self.pid}, started {self.started}, expires {self.expires})"


class Lease:
    """The lease on `folder` for run `run`. `acquire` before any work; `release` at the end, which
    also removes the folders `acquire` made, if nothing else was written there."""

    def __init__(self, folder: str, run: str, seconds: int = LEASE_SECONDS):
        self.path, self.run, self.seconds = join(folder, LEASE_NAME), run, seconds
        self._token: str | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._made: list[str] = []  # local folders the lease file's creation made
        self.lost = False  # a renewal found the lease taken over

    def acquire(self) -> Holder | None:
        """Takes the lease; returns the stale holder it took over (None if it was free). Raises
        LeaseHeldError naming the holder when another live run has it."""
        mine = self._holder()
        self._made = storage.missing_folders(self.path)
        self._token = storage.create_exclusive(self.path, mine.to_bytes())
        if self._token is not None:
            return None
        current = storage.read_with_token(self.path)
        if current is None:  # released in between: try once more
            self._token = storage.create_exclusive(self.path, mine.to_bytes())
            if self._token is not None:
                return None
            raise LeaseHeldError(f"{self.path} was taken by another run just now")
        data, token = current
        holder = Holder.from_bytes(data)
        now = _now()
        if holder is not None and not holder.is_stale(now):
            raise LeaseHeldError(
                f"another run is writing this output: {holder.describe()} holds {self.path}; "
                "wait for it to finish (if it is gone, its lease expires then, or delete the file)"
            )
        try:
            self._token = storage.replace_if_unchanged(self.path, mine.to_bytes(), token, self.seconds)
        except storage.FolderBusy:
            raise LeaseHeldError(
                f"the stale lease {self.path} of {holder.describe() if holder else 'an unknown run'} cannot be "
                f"taken over: a process is committing into the folder (its lock held over {self.seconds} s)"
            ) from None
        if self._token is None:
            raise LeaseHeldError(f"{self.path} was taken over by another run just now")
        stale = holder or Holder("unknown", "unknown", 0, "", "")
        _LOG.warning("took over the stale lease of %s on %s", stale.describe(), self.path)
        return stale

    @property
    def held(self) -> bool:
        return self._token is not None

    def renew(self) -> None:
        token = self._token and storage.replace_if_unchanged(
            self.path, self._holder().to_bytes(), self._token, self.seconds
        )
        if not token:
            self.lost, self._token = True, None
            raise LeaseLost(f"lost the lease {self.path}: another run took it over")
        self._token = token

    def keep_renewed(self) -> None:
        """Renews the lease from a daemon thread until `release`, or until it is lost."""

        def loop():
            while not self._stop.wait(self.seconds / 3):
                try:
                    self.renew()
                except LeaseLost as e:
                    _LOG.error("%s; this run will not publish", e)
                    return
                except Exception:
                    _LOG.exception("could not renew %s", self.path)

        self._renewer = threading.Thread(target=loop, name="lease-renewer", daemon=True)
        self._renewer.start()

    def release(self) -> None:
        self._stop.set()
        try:
            if self._renewer is not None:
                self._renewer.join()  # a Ctrl-C may end this wait: the lease goes all the same
        finally:
            with _interrupts_held_back():  # the run's last step: a Ctrl-C within it is taken once it is done
                if self._token is not None and not storage.delete_if_unchanged(self.path, self._token, self.seconds):
                    _LOG.warning("%s was no longer ours at release", self.path)
                self._token = None
                # A run refused after taking the lease leaves no empty output folder behind.
                storage.delete(self._made, MadeFolders(tuple(self._made)))

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if isinstance(error, Unfinished):
            self._abandon()
        else:
            self.release()

    def _abandon(self) -> None:
        """Stops renewing, leaving the lease file for the next run to take over."""
        self._stop.set()
        self._token = None

    def _holder(self) -> Holder:
        return Holder.this_process(self.run, _now(), self.seconds)


class Fence:
    """Proof, for as long as it is held (`with Fence(folder, run) as fence:`), that `run` holds
    `folder`'s lease, so that its writes of committed names (`copy`, `write`) cannot land once
    another run has taken it (module docstring). Raises LeaseLost when `run` does not hold it.
    `unattended`: a run without a lease (a conversion launched from a template): nothing to prove,
    plain writes."""

    def __init__(self, folder: str, run: str, unattended: bool = False):
        self.folder, self.run, self._unattended = folder, run, unattended
        self.path = join(folder, LEASE_NAME)
        self._lock = None
        self._generation: str | None = None

    def __enter__(self) -> Fence:
        if self._unattended:
            return self
        if not is_remote(self.folder):
            self._lock = storage.folder_lock(self.folder)
            self._lock.__enter__()
        try:
            self._prove()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, kind, error, traceback) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.__exit__(kind, error, traceback)

    def copy(self, source: str, destination: str) -> None:
        """storage.copy of `source` onto the committed name `destination`."""
        self._fenced(storage.commit_copy, source, destination)

    def write(self, path: str, data: bytes | str, staging: str) -> None:
        """storage.write_atomically of the committed name `path` (on GCS staged in `staging`)."""
        self._fenced(storage.commit_write, path, data, staging=staging)

    def delete(self, paths: list[str], because: Evidence) -> list[str]:
        """storage.delete of names others may write, behind the lease: locally under the folder's
        lock; on GCS a delete cannot name the lease, so each object's generation is read first,
        the lease proven after that, and each delete made on the generation read: what another run
        wrote since (a new generation) is never deleted."""
        try:
            return storage.delete(paths, because, prove=self._prove if self._generation is not None else None)
        except storage.Changed as e:
            raise LeaseLost(f"{e.filename} changed under run {self.run}'s commit: another run is writing here") from e

    def _fenced(self, write, *args, **kwargs) -> None:
        """The write behind the lease; when GCS refuses it, the lease changed: renewed by this
        run (prove again and retry) or taken over (LeaseLost)."""
        if self._generation is None:  # local (the folder's lock is held), or no lease to prove
            return write(*args, lease=None, **kwargs)
        from google.api_core.exceptions import PreconditionFailed

        for _ in range(5):
            try:
                return write(*args, lease=(self.path, self._generation), **kwargs)
            except PreconditionFailed:
                self._prove()
        raise LeaseLost(f"{self.path} keeps changing under run {self.run}'s writes")

    def _prove(self) -> None:
        current = storage.read_with_token(self.path)
        holder = Holder.from_bytes(current[0]) if current else None
        if holder is None or holder.run != self.run:
            who = holder.describe() if holder else "nobody"
            raise LeaseLost(
                f"run {self.run} no longer holds {self.path} ({who} does): it stalled past its lease "
                "(lease_seconds) and another run took over, so it touches nothing"
            )
        self._generation = current[1] if is_remote(self.folder) else None


@contextlib.contextmanager
def _interrupts_held_back() -> Iterator[None]:
    """Within it, a Ctrl-C or SIGTERM is held back, then taken as its handler would have taken it
    (KeyboardInterrupt, pipeline.ending.Terminated) once the block is done. A run releases its
    lease as the last step of its clean-up, or just after it committed: an interrupt landing in
    the removal, even the run's first and only one, cut it short and left .lease behind, for the
    next run to take over with a warning. Off the main thread, where no handler runs, it changes
    nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[tuple[int, FrameType | None]] = []

    def hold(number: int, frame: FrameType | None) -> None:
        came.append((number, frame))

    handlers = _python_handlers()
    for number in handlers:
        signal.signal(number, hold)
    try:
        yield
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
        if came:
            number, frame = came[0]
            handlers[number](number, frame)


def _python_handlers() -> dict[int, Callable]:
    """SIGINT's and SIGTERM's handlers where they are Python functions: a signal left to its
    default action ends the process at once, nothing is held back."""
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    return {number: handler for number, handler in handlers.items() if callable(handler)}


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _iso(moment: datetime.datetime) -> str:
    return moment.isoformat(timespec="seconds")


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True
