"""Shared pytest fixtures.

GCS emulator fixtures
---------------------
``gcs_emulator`` (session scope) starts one in-memory GCS emulator on
127.0.0.1 the first time a test asks for it (sessions that never use it pay
nothing) and, from then until the end of the session, exports its ``env``
(STORAGE_EMULATOR_HOST, GOOGLE_APPLICATION_CREDENTIALS -> fake ADC file,
GOOGLE_CLOUD_PROJECT) in ``os.environ``, so Beam ``gs://`` I/O in this process
and in any subprocess started without an explicit ``env=`` goes to the
emulator. The previous values are restored at session end.

``gcs_bucket`` (function scope) yields the name of a fresh, existing bucket
unique to the test (``gs://{gcs_bucket}/...``).

What Beam caches per process (apache-beam 2.77), and how it is handled:

* ``apache_beam.internal.gcp.auth._Credentials`` memoises the result of
  ``google.auth.default()`` in class attributes (``_credentials_init`` /
  ``_credentials``) on the first GcsIO creation in the process, *including
  the failure case*: without ADC it spends ~20 s retrying, then caches
  ``None`` ("connecting anonymously"). Every later ``storage.Client`` Beam
  builds receives these credentials. A stale entry (nothing, or a developer's
  real ADC whose token would need refreshing against oauth2.googleapis.com --
  impossible offline) would outlive our env change, so the fixture clears the
  memo when it starts (next GcsIO resolves the fake ADC instantly) and again
  at teardown (so later tests do not keep the fake credentials).
  Resolving credentials also calls ``socket.setdefaulttimeout(60)`` once per
  process if no default timeout was set (process-wide side effect; left as is).
* Not cached: ``GcsFileSystem._gcsIO()`` builds a new ``GcsIO`` -- and so a
  new ``google.cloud.storage.Client``, which reads STORAGE_EMULATOR_HOST in
  its constructor -- on every call, so setting the env var is enough for the
  endpoint.
* ``FileSystems._pipeline_options`` keeps the options of the last
  constructed ``Pipeline`` (process-wide); harmless here (endpoint/auth do not
  come from options unless a test sets e.g. impersonation), so not touched.
"""

import os
import re
import uuid
import warnings

import pytest
from apache_beam.options.pipeline_options import StandardOptions
from hypothesis import settings

# Generated cases (hypothesis): on CI the same ones every run (a failure there is reproducible
# from its log); elsewhere new ones each run, so the classes are explored further over time.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")

try:  # tests/ as plain rootdir-inserted directory (no __init__.py) ...
    from gcs_emulator import GcsEmulator
    from subprocess_limits import SUBPROCESS_TIMEOUT
except ImportError:  # ... or as a package.
    from tests.gcs_emulator import GcsEmulator
    from tests.subprocess_limits import SUBPROCESS_TIMEOUT


@pytest.fixture(scope="session", autouse=True)
def test_pipelines_run_on_the_fn_api_runner():
    """Pipelines a test builds without naming a runner run on the FnApiRunner. Beam 2.77's default
    DirectRunner first tries Prism: it downloads Prism's binary from GitHub where there is internet
    (so the tests would run on another runner there), and where there is none it falls back to
    the FnApiRunner, leaving an empty /tmp/beam-temp* folder per pipeline. The CLI's runs name
    their runner (pipeline.runners), so this changes nothing they do."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(StandardOptions, "DEFAULT_RUNNER", "FnApiRunner")
        yield


def _reset_beam_gcp_credentials_cache():
    """Forget Beam's per-process memo of Application Default Credentials."""
    try:
        from apache_beam.internal.gcp import auth
    except ImportError:  # Beam (gcp extra) not installed: nothing cached.
        return
    creds_cls = getattr(auth, "_Credentials", None)
    if creds_cls is None:
        return
    with creds_cls._credentials_lock:
        creds_cls._credentials_init = False
        creds_cls._credentials = None


@pytest.fixture(scope="session")
def gcs_emulator():
    """Running ``GcsEmulator``; its env is applied to os.environ."""
    emulator = GcsEmulator(start_timeout=SUBPROCESS_TIMEOUT)
    emulator.start()
    try:
        with pytest.MonkeyPatch.context() as mp:
            for key, value in emulator.env.items():
                mp.setenv(key, value)
            _reset_beam_gcp_credentials_cache()
            try:
                yield emulator
            finally:
                _reset_beam_gcp_credentials_cache()
    finally:
        emulator.stop()


@pytest.fixture
def gcs_bucket(gcs_emulator, request):
    """Name of a new, empty bucket in the emulator, unique to this test."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
    name = f"t-{slug[:40].rstrip('-')}-{uuid.uuid4().hex[:10]}"
    code = gcs_emulator.revive()
    if code is not None:
        ended = f"the session's GCS emulator had ended (exit code {code})"
        warnings.warn(f"{ended}; started again for {request.node.name}", stacklevel=2)
    gcs_emulator.create_bucket(name)
    return name
