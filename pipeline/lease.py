"""One run at a time per output: a lease file (`OUTPUT/.lease`) created only if absent, holding
the run, its host and process, when it started and when the lease expires. The launcher renews it
while the run lives; a lease whose expiry has passed, or whose process is gone from this host, is
stale and is taken over with a warning (the caller then removes what that run left behind).

Creation, renewal and release are conditional writes (pipeline.storage): GCS preconditions on the
object generation, `O_EXCL` and an flock locally.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import socket
import threading

from pipeline import storage
from pipeline.contract.layout import join

_LOG = logging.getLogger(__name__)

LEASE_NAME = ".lease"
LEASE_SECONDS = 300  # a live run renews every third of this


class LeaseHeldError(RuntimeError):
    """Another live run holds the output."""


class Unfinished(KeyboardInterrupt):
    """An interrupt that stopped a run before it removed what it wrote (a second Ctrl-C during
    its clean-up). Raised through the run's `with Lease`, it leaves the lease in place: once this
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
        """None for a lease file that cannot be parsed (treated as stale)."""
        try:
            return cls(**json.loads(data))
        except (ValueError, TypeError):
            return None

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
        self._token = storage.replace_if_unchanged(self.path, mine.to_bytes(), token)
        if self._token is None:
            raise LeaseHeldError(f"{self.path} was taken over by another run just now")
        stale = holder or Holder("unknown", "unknown", 0, "", "")
        _LOG.warning("took over the stale lease of %s on %s", stale.describe(), self.path)
        return stale

    @property
    def held(self) -> bool:
        return self._token is not None

    def renew(self) -> None:
        token = self._token and storage.replace_if_unchanged(self.path, self._holder().to_bytes(), self._token)
        if not token:
            raise LeaseHeldError(f"lost the lease {self.path}: another run took it over")
        self._token = token

    def keep_renewed(self) -> None:
        """Renews the lease from a daemon thread until `release`."""

        def loop():
            while not self._stop.wait(self.seconds / 3):
                try:
                    self.renew()
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
            if self._token is not None and not storage.delete_if_unchanged(self.path, self._token):
                _LOG.warning("%s was no longer ours at release", self.path)
            self._token = None
            # A run refused after taking the lease leaves no empty output folder behind.
            storage.remove_empty_folders(self._made)

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


def lease_problems(folder: str, run: str) -> list[str]:
    """Why run `run` may not commit into `folder`: it no longer holds the folder's lease (a stalled
    run whose lease expired and was taken over). Empty when it holds it."""
    current = storage.read_with_token(join(folder, LEASE_NAME))
    holder = Holder.from_bytes(current[0]) if current else None
    if holder is not None and holder.run == run:
        return []
    who = holder.describe() if holder else "nobody"
    return [f"run {run} no longer holds {join(folder, LEASE_NAME)} ({who} does): another run may be writing here"]


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
