"""A throw-away, in-memory GCS server for tests (no real GCS, no internet).

``GcsEmulator`` runs ``gcp-storage-emulator`` (the ``gcp_storage_emulator``
package in the venv) as a child process on a free loopback port and gives
tests what they need to point Beam / google-cloud-storage at it::

    with GcsEmulator() as emu:
        emu.create_bucket("b")
        emu.upload_bytes("gs://b/in/x.csv", b"a,b\\n")
        subprocess.run([...], env={**os.environ, **emu.env})
        assert emu.read_bytes("gs://b/in/x.csv") == b"a,b\\n"

``env`` holds the three variables a process needs:

* ``STORAGE_EMULATOR_HOST`` -- google-cloud-storage (and therefore Beam's
  ``gs://`` FileSystem, which is built on it) sends every request there.
* ``GOOGLE_APPLICATION_CREDENTIALS`` -- a *fake* authorized-user ADC file
  whose access token expires in 2099. Without credentials Beam retries
  ``google.auth.default()`` (GCE metadata probing, exponential backoff) for
  ~20 s in every process before it falls back to anonymous access. With this
  file ADC resolves instantly and, as the token is "valid", nothing ever tries
  to refresh it against oauth2.googleapis.com. The emulator ignores the
  bearer token.
* ``GOOGLE_CLOUD_PROJECT`` -- so ADC/clients do not go looking for a project.

TensorFlow's GCS filesystem ignores ``STORAGE_EMULATOR_HOST``: never use
``tf.io.gfile`` on emulator paths; download with ``read_bytes`` (or Beam).

The helper methods here talk to the emulator through their own
google-cloud-storage client configured with an explicit endpoint and
anonymous credentials, so they work whether or not ``env`` has been applied
to ``os.environ``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterable
from pathlib import Path

__all__ = ["GcsEmulator", "GcsEmulatorError", "split_gs_uri", "write_fake_adc"]

_PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")

# Token "valid" until 2099 -> google-auth never attempts a refresh.
_FAKE_ADC = {
    "type": "authorized_user",
    "client_id": "gcs-emulator-fake.apps.googleusercontent.com",
    "client_secret": "gcs-emulator-fake-secret",
    "refresh_token": "gcs-emulator-fake-refresh-token",
    "token": "gcs-emulator-fake-access-token",
    "expiry": "2099-01-01T00:00:00Z",
}


def write_fake_adc(folder: str) -> str:
    """Writes the fake ADC file (see the module docstring) into `folder`; its path."""
    path = os.path.join(folder, "fake_adc.json")
    with open(path, "w") as f:
        json.dump(_FAKE_ADC, f)
    return path


class GcsEmulatorError(RuntimeError):
    """The emulator could not be started (message includes its output)."""


def split_gs_uri(uri: str) -> tuple[str, str]:
    """``gs://bucket/a/b`` -> ``("bucket", "a/b")``; object part may be ''."""
    if not uri.startswith("gs://"):
        raise ValueError(f"not a gs:// URI: {uri!r}")
    bucket, _, name = uri[len("gs://") :].partition("/")
    if not bucket:
        raise ValueError(f"no bucket in gs:// URI: {uri!r}")
    return bucket, name


def _free_loopback_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# Runs the emulator's own CLI entry point (what the ``gcp-storage-emulator``
# console script calls), plus a watchdog thread that exits the server when
# the process that started it is gone -- so a killed/crashed test run does not
# leave orphan servers behind.
_LAUNCHER = """
import os, sys, threading, time
parent = int(sys.argv[1])
def _watch():
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)
threading.Thread(target=_watch, daemon=True).start()
from gcp_storage_emulator.__main__ import main
sys.exit(main(sys.argv[2:]))
"""


def _emulator_command(host: str, port: int, probe_bucket: str) -> list[str]:
    # -q: log only CRITICAL (the server logs every request at DEBUG otherwise).
    # --default-bucket: a bucket with a unique name, so readiness is checked
    # against *this* server and not whatever else may answer on the port.
    return [
        sys.executable,
        "-c",
        _LAUNCHER,
        str(os.getpid()),
        "start",
        f"--host={host}",
        f"--port={port}",
        "--in-memory",
        "-q",
        f"--default-bucket={probe_bucket}",
    ]


class GcsEmulator:
    """In-memory GCS emulator subprocess on 127.0.0.1; a context manager.

    Args:
      host: loopback address to bind.
      port: fixed port; default picks a free one (retried if it gets taken
        between probing and binding).
      project: value for GOOGLE_CLOUD_PROJECT.
      start_timeout: seconds to wait for the server to answer.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int | None = None,
        project: str = "gcs-emulator-project",
        start_timeout: float = 30.0,
    ) -> None:
        self.host = host
        self.port = port
        self.project = project
        self.start_timeout = start_timeout
        self._proc: subprocess.Popen | None = None
        self._tmpdir: str | None = None
        self._log_path: str | None = None
        self._client = None
        self.adc_path: str | None = None

    # -- lifecycle --------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> GcsEmulator:
        if self._proc is not None:
            raise GcsEmulatorError("emulator already started")
        self._tmpdir = tempfile.mkdtemp(prefix="gcs-emulator-")
        try:
            self.adc_path = write_fake_adc(self._tmpdir)
            fixed_port = self.port is not None
            attempts = 1 if fixed_port else 3
            for attempt in range(attempts):
                if not fixed_port:
                    self.port = _free_loopback_port(self.host)
                try:
                    self._launch_and_wait()
                    return self
                except GcsEmulatorError as e:
                    # Port grabbed by someone else between probe and bind.
                    if attempt + 1 < attempts and "Address already in use" in str(e):
                        continue
                    raise
        except BaseException:
            self.stop()
            raise
        return self  # pragma: no cover

    def revive(self) -> int | None:
        """Starts a server that has died again, on its port and with its environment (its data is
        gone), and returns its exit code; None when it was running. A long suite's server has been
        seen to end with no output, cause unknown: the tests after it then fail for that alone."""
        if self._proc is None or self._proc.poll() is None:
            return None
        code, self._proc = self._proc.returncode, None
        self._client = None
        self._launch_and_wait()
        return code

    def _launch_and_wait(self) -> None:
        self._log_path = os.path.join(self._tmpdir, f"emulator-{self.port}.log")
        probe_bucket = f"gcs-emulator-probe-{uuid.uuid4().hex[:16]}"
        cmd = _emulator_command(self.host, self.port, probe_bucket)
        probe_url = f"{self.url}/storage/v1/b/{probe_bucket}"
        shown = f"{sys.executable} -c <launcher> {' '.join(cmd[3:])}"
        child_env = dict(os.environ)
        # Keep the server's own (disk) storage, if any, out of the repo.
        child_env["STORAGE_BASE"] = self._tmpdir
        with open(self._log_path, "wb") as log:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self._tmpdir, env=child_env
            )
        # Bypass any HTTP(S)_PROXY from the environment for the probe.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = time.monotonic() + self.start_timeout
        last_err: BaseException | None = None
        while time.monotonic() < deadline:
            rc = self._proc.poll()
            if rc is not None:
                self._proc = None
                raise GcsEmulatorError(
                    f"gcp-storage-emulator exited with code {rc} before "
                    f"answering on {self.url}.\ncommand: {shown}\n"
                    f"output:\n{self._read_log()}"
                )
            # The server binds in a thread: on failure (e.g. "Address already
            # in use") it prints a traceback and hangs instead of exiting.
            output = self._read_log()
            if "Traceback (most recent call last)" in output:
                output = self._settled_log(output)  # the traceback may still be being written
                self._kill()
                raise GcsEmulatorError(
                    f"gcp-storage-emulator failed to start on {self.url}.\ncommand: {shown}\noutput:\n{output}"
                )
            try:
                with opener.open(probe_url, timeout=1.0) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError) as e:
                last_err = e
            time.sleep(0.05)
        self._kill()
        raise GcsEmulatorError(
            f"gcp-storage-emulator did not answer on {self.url} within "
            f"{self.start_timeout:.0f}s (last error: {last_err!r}).\n"
            f"command: {shown}\noutput:\n{self._read_log()}"
        )

    def _settled_log(self, output: str, quiet: float = 0.2, limit: float = 3.0) -> str:
        """The log once it has stopped growing for `quiet` seconds (at most `limit` seconds)."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            time.sleep(quiet)
            later = self._read_log()
            if later == output:
                break
            output = later
        return output

    def _read_log(self) -> str:
        try:
            with open(self._log_path, "rb") as f:
                return f.read()[-8000:].decode("utf-8", "replace") or "<empty>"
        except OSError as e:
            return f"<unreadable: {e}>"

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def stop(self) -> None:
        """Kill the server and delete the temp dir (ADC file, logs)."""
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # pragma: no cover - best effort
                pass
            self._client = None
        self._kill()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
        self.adc_path = None

    def __enter__(self) -> GcsEmulator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- environment ------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """Variables that point a (sub)process's Beam/GCS client here."""
        if self.adc_path is None:
            raise GcsEmulatorError("emulator not started")
        env = {
            "STORAGE_EMULATOR_HOST": self.url,
            "GOOGLE_APPLICATION_CREDENTIALS": self.adc_path,
            "GOOGLE_CLOUD_PROJECT": self.project,
        }
        # Only if a proxy is configured: make sure loopback bypasses it
        # (requests honours HTTP(S)_PROXY for 127.0.0.1 unless NO_PROXY says
        # otherwise).
        if any(os.environ.get(v) for v in _PROXY_VARS):
            for var in ("NO_PROXY", "no_proxy"):
                parts = [p for p in os.environ.get(var, "").split(",") if p]
                for h in (self.host, "localhost"):
                    if h not in parts:
                        parts.append(h)
                env[var] = ",".join(parts)
        return env

    # -- data helpers (own client; independent of os.environ) -------------

    @property
    def client(self):
        """A google-cloud-storage Client bound to this emulator."""
        if not self.running:
            raise GcsEmulatorError("emulator not running")
        if self._client is None:
            from google.auth.credentials import AnonymousCredentials
            from google.cloud import storage

            self._client = storage.Client(
                project=self.project, credentials=AnonymousCredentials(), client_options={"api_endpoint": self.url}
            )
            # Loopback only: never route through an environment proxy.
            self._client._http.trust_env = False
        return self._client

    def create_bucket(self, name: str) -> str:
        """Create bucket ``name``; returns ``gs://name``."""
        self.client.create_bucket(name)
        return f"gs://{name}"

    def upload_bytes(self, gs_uri: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        bucket, name = split_gs_uri(gs_uri)
        if not name:
            raise ValueError(f"no object name in {gs_uri!r}")
        blob = self.client.bucket(bucket).blob(name)
        blob.upload_from_string(data, content_type=content_type)
        return gs_uri

    def upload_dir(self, local_dir, gs_prefix: str) -> list[str]:
        """Upload every file under ``local_dir`` (recursively) to
        ``gs_prefix/<relative path>``; returns the sorted URIs written."""
        root = Path(local_dir)
        if not root.is_dir():
            raise NotADirectoryError(str(root))
        prefix = gs_prefix.rstrip("/")
        split_gs_uri(prefix + "/")  # validate
        uris = []
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            uri = f"{prefix}/{path.relative_to(root).as_posix()}"
            self.upload_bytes(uri, path.read_bytes())
            uris.append(uri)
        return uris

    def read_bytes(self, gs_uri: str) -> bytes:
        bucket, name = split_gs_uri(gs_uri)
        return self.client.bucket(bucket).blob(name).download_as_bytes()

    def list_blobs(self, gs_prefix: str) -> list:
        """google-cloud-storage Blob objects under a prefix (recursive)."""
        bucket, prefix = split_gs_uri(gs_prefix)
        return list(self.client.list_blobs(bucket, prefix=prefix or None))

    def list_uris(self, gs_prefix: str) -> list[str]:
        """Sorted ``gs://`` URIs of all objects whose name starts with the
        prefix (plain string prefix, recursive, like GCS itself)."""
        bucket, _ = split_gs_uri(gs_prefix)
        return sorted(f"gs://{bucket}/{b.name}" for b in self.list_blobs(gs_prefix))

    def download_to(self, gs_uris: Iterable[str], local_dir) -> list[str]:
        """Download objects into ``local_dir`` under their basenames
        (flattened; duplicate basenames are an error); returns local paths."""
        out = []
        os.makedirs(local_dir, exist_ok=True)
        for uri in gs_uris:
            dest = os.path.join(local_dir, uri.rstrip("/").rsplit("/", 1)[-1])
            if dest in out:
                raise ValueError(f"two URIs share the basename of {uri!r}")
            with open(dest, "wb") as f:
                f.write(self.read_bytes(uri))
            out.append(dest)
        return out
