"""The GCS emulator fixtures against the real libraries (no mocks).

Everything here is real HTTP to the emulator on 127.0.0.1: Beam's gs://
FileSystem, Beam pipelines, google-cloud-storage, and a Beam subprocess.
Data written by Beam is read back through google-cloud-storage (never
tf.io.gfile: TensorFlow ignores STORAGE_EMULATOR_HOST).
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import apache_beam as beam
import pytest
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

# Aliased so pytest does not try to collect it as a test class.
from apache_beam.testing.test_pipeline import TestPipeline as BeamTestPipeline
from apache_beam.testing.util import assert_that, equal_to

try:
    from gcs_emulator import GcsEmulator, GcsEmulatorError
except ImportError:
    from tests.gcs_emulator import GcsEmulator, GcsEmulatorError
from tests.subprocess_limits import SUBPROCESS_TIMEOUT

# DirectRunner (the default) first tries to download the Prism binary from
# github.com and only then falls back to FnApiRunner. Name the runner it falls
# back to so these tests neither depend on network behaviour nor on Prism.
RUNNER = "FnApiRunner"

NESTED = {
    "prefix/a.txt": b"aaaa",
    "prefix/b.bin": b"\x00\x01\x02",
    "prefix/sub/c.txt": b"c" * 100,
    "prefix/sub/deep/d.txt": b"",
    "prefix/sub/deep/e.csv": b"x,y\n1,2\n",
    # Outside the prefix (sibling whose name merely starts with "prefix").
    "prefix2/f.txt": b"ffffff",
    "other/g.txt": b"g",
}


def _seed(emu, bucket, objects=NESTED):
    for name, data in objects.items():
        emu.upload_bytes(f"gs://{bucket}/{name}", data)


def _matched(pattern):
    (result,) = FileSystems.match([pattern])
    return {m.path: m for m in result.metadata_list}


def _uris(bucket, names):
    return {f"gs://{bucket}/{n}" for n in names}


# -- emulator helpers themselves -------------------------------------------


def test_fixture_env_is_exported(gcs_emulator):
    env = gcs_emulator.env
    assert env["STORAGE_EMULATOR_HOST"].startswith("http://127.0.0.1:")
    for key in ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT"):
        assert os.environ[key] == env[key]
    with open(env["GOOGLE_APPLICATION_CREDENTIALS"]) as f:
        adc = json.load(f)
    assert adc["type"] == "authorized_user" and adc["expiry"].startswith("2099")


def test_bucket_is_fresh_and_unique(gcs_emulator, gcs_bucket):
    assert gcs_emulator.list_uris(f"gs://{gcs_bucket}/") == []
    assert gcs_emulator.client.lookup_bucket(gcs_bucket) is not None
    assert len(gcs_bucket) <= 63 and gcs_bucket == gcs_bucket.lower()


def test_upload_dir_list_and_read(gcs_emulator, gcs_bucket, tmp_path):
    (tmp_path / "img" / "cat").mkdir(parents=True)
    (tmp_path / "img" / "cat" / "1.jpg").write_bytes(b"\xff\xd8cat")
    (tmp_path / "img" / "dog.png").write_bytes(b"\x89PNGdog")
    (tmp_path / "labels.csv").write_bytes(b"path,label\n")

    written = gcs_emulator.upload_dir(tmp_path, f"gs://{gcs_bucket}/in/")
    expected = sorted(_uris(gcs_bucket, ["in/img/cat/1.jpg", "in/img/dog.png", "in/labels.csv"]))
    assert written == expected
    assert gcs_emulator.list_uris(f"gs://{gcs_bucket}/in") == expected
    assert gcs_emulator.list_uris(f"gs://{gcs_bucket}/in/img/") == expected[:2]
    assert gcs_emulator.read_bytes(f"gs://{gcs_bucket}/in/img/dog.png") == (b"\x89PNGdog")


def test_start_failure_reports_server_output(gcs_emulator):
    # The session emulator already owns this port -> the child must fail and
    # the error must carry its output.
    clash = GcsEmulator(port=gcs_emulator.port, start_timeout=SUBPROCESS_TIMEOUT)
    try:
        with pytest.raises(GcsEmulatorError) as info:
            clash.start()
    finally:
        clash.stop()
    message = str(info.value)
    assert "failed to start" in message
    assert "Address already in use" in message  # detected from its output: a time-out says "did not answer"
    assert not clash.running and clash.adc_path is None
    assert gcs_emulator.running  # the session one is untouched


_ORPHAN_CODE = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, sys.argv[1])
    from gcs_emulator import GcsEmulator
    emu = GcsEmulator().start()
    print(emu.port, emu._tmpdir, flush=True)
    os._exit(0)  # die without stop(): the server must notice and exit
""")


def test_server_exits_when_its_parent_dies():
    import socket

    proc = subprocess.run(
        [sys.executable, "-c", _ORPHAN_CODE, os.path.dirname(os.path.abspath(__file__))],
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    port_str, tmpdir = proc.stdout.split()
    port = int(port_str)
    shutil.rmtree(tmpdir, ignore_errors=True)  # the dead parent left it
    deadline = time.monotonic() + SUBPROCESS_TIMEOUT  # it must exit, however busy the machine
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        except OSError:
            return  # server gone
        time.sleep(0.2)
    pytest.fail(f"orphaned emulator still listening on port {port}")


# -- Beam FileSystems on gs:// ---------------------------------------------


def test_match_double_star_returns_nested_objects_with_sizes(gcs_emulator, gcs_bucket):
    _seed(gcs_emulator, gcs_bucket)
    before = time.time()
    found = _matched(f"gs://{gcs_bucket}/prefix/**")

    inside = {n: d for n, d in NESTED.items() if n.startswith("prefix/")}
    assert set(found) == _uris(gcs_bucket, inside)
    for name, data in inside.items():
        meta = found[f"gs://{gcs_bucket}/{name}"]
        assert meta.size_in_bytes == len(data)
        # Populated (epoch seconds, float) from the object's `updated`.
        assert isinstance(meta.last_updated_in_seconds, float)
        assert abs(meta.last_updated_in_seconds - before) < 120


def test_match_star_vs_double_star(gcs_emulator, gcs_bucket):
    _seed(gcs_emulator, gcs_bucket)
    b = gcs_bucket
    # `*` never crosses "/" (Beam translates it to [^/]*, client-side).
    assert set(_matched(f"gs://{b}/prefix/*")) == _uris(b, ["prefix/a.txt", "prefix/b.bin"])
    assert set(_matched(f"gs://{b}/prefix/*/*")) == _uris(b, ["prefix/sub/c.txt"])
    assert set(_matched(f"gs://{b}/prefix/*.txt")) == _uris(b, ["prefix/a.txt"])
    # A trailing "/" means "/*".
    assert set(_matched(f"gs://{b}/prefix/")) == _uris(b, ["prefix/a.txt", "prefix/b.bin"])
    # `prefix*` is a name glob, not a directory walk: only slash-free names.
    assert _matched(f"gs://{b}/prefix*") == {}
    assert set(_matched(f"gs://{b}/prefix*/**")) == _uris(b, [n for n in NESTED if n.startswith("prefix")])
    # `**` crosses "/" ...
    assert set(_matched(f"gs://{b}/**.txt")) == _uris(b, [n for n in NESTED if n.endswith(".txt")])
    # ... but "prefix/**/*.txt" needs at least one directory level below.
    assert set(_matched(f"gs://{b}/prefix/**/*.txt")) == _uris(b, ["prefix/sub/c.txt", "prefix/sub/deep/d.txt"])
    # No glob: exact object lookup.
    assert set(_matched(f"gs://{b}/prefix/a.txt")) == _uris(b, ["prefix/a.txt"])
    assert _matched(f"gs://{b}/prefix/missing.txt") == {}


def test_generation_and_updated_metadata(gcs_emulator, gcs_bucket):
    uri = f"gs://{gcs_bucket}/fp/obj.bin"
    gcs_emulator.upload_bytes(uri, b"first")
    (blob1,) = gcs_emulator.list_blobs(f"gs://{gcs_bucket}/fp/")
    assert isinstance(blob1.generation, int) and blob1.generation > 0
    assert blob1.updated is not None and blob1.updated.tzinfo is not None
    assert blob1.crc32c and blob1.md5_hash

    # Beam's match metadata: path, size, last_updated (= blob.updated); no
    # generation/crc32c fields.
    meta = _matched(f"gs://{gcs_bucket}/fp/**")[uri]
    assert meta.size_in_bytes == 5
    assert meta.last_updated_in_seconds == pytest.approx(blob1.updated.timestamp(), abs=1e-3)
    assert not hasattr(meta, "generation")
    assert FileSystems.last_updated(uri) == pytest.approx(meta.last_updated_in_seconds, abs=1e-3)
    # crc32c is reachable through Beam, one object at a time.
    assert FileSystems.checksum(uri) == blob1.crc32c

    time.sleep(0.01)
    gcs_emulator.upload_bytes(uri, b"second!")  # overwrite
    (blob2,) = gcs_emulator.list_blobs(f"gs://{gcs_bucket}/fp/")
    assert blob2.generation != blob1.generation
    assert blob2.updated > blob1.updated
    assert blob2.crc32c != blob1.crc32c
    meta2 = _matched(f"gs://{gcs_bucket}/fp/**")[uri]
    assert meta2.size_in_bytes == 7
    assert meta2.last_updated_in_seconds > meta.last_updated_in_seconds


def test_open_create_rename_delete(gcs_emulator, gcs_bucket):
    src = f"gs://{gcs_bucket}/io/src.bin"
    dst = f"gs://{gcs_bucket}/io/moved/dst.bin"
    payload = os.urandom(256 * 1024) + b"tail"

    with FileSystems.create(src) as f:
        f.write(payload)
    assert FileSystems.exists(src)
    assert gcs_emulator.read_bytes(src) == payload  # independent read path
    with FileSystems.open(src) as f:
        assert f.read() == payload

    FileSystems.rename([src], [dst])
    assert not FileSystems.exists(src)
    assert FileSystems.exists(dst)
    assert gcs_emulator.list_uris(f"gs://{gcs_bucket}/io/") == [dst]
    with FileSystems.open(dst) as f:
        assert f.read() == payload

    FileSystems.delete([dst])
    assert not FileSystems.exists(dst)
    assert gcs_emulator.list_uris(f"gs://{gcs_bucket}/") == []


def test_beam_in_process_uses_emulator_and_fake_adc(gcs_emulator):
    # Beam memoises ADC per process; the fixture must have reset that memo so
    # the client Beam builds now carries the fake (non-expiring) token and
    # talks to the emulator.
    from apache_beam.io.gcp import gcsio

    client = gcsio.GcsIO().client
    assert client._connection.API_BASE_URL == gcs_emulator.url
    assert client._credentials.token == "gcs-emulator-fake-access-token"
    assert client._credentials.valid


# -- pipelines -------------------------------------------------------------


def test_write_to_tfrecord_gzip_on_gcs_roundtrip(gcs_emulator, gcs_bucket, tmp_path):
    import tensorflow as tf

    records = [f"record-{i:03d}-".encode() + os.urandom(i % 17) for i in range(60)]
    out_prefix = f"gs://{gcs_bucket}/tfr/part"
    with BeamTestPipeline(runner=RUNNER) as p:
        _ = (
            p
            | beam.Create(records)
            | beam.io.WriteToTFRecord(
                out_prefix, compression_type=CompressionTypes.GZIP, num_shards=2, file_name_suffix=".tfrecord.gz"
            )
        )

    uris = gcs_emulator.list_uris(f"gs://{gcs_bucket}/")
    assert uris == [
        f"{out_prefix}-00000-of-00002.tfrecord.gz",
        f"{out_prefix}-00001-of-00002.tfrecord.gz",
    ]
    local = gcs_emulator.download_to(uris, tmp_path / "dl")
    for path in local:
        with open(path, "rb") as f:
            assert f.read(2) == b"\x1f\x8b"  # really gzip
    ds = tf.data.TFRecordDataset(local, compression_type="GZIP")
    got = [r.numpy() for r in ds]
    assert sorted(got) == sorted(records)


def test_fileio_match_all_and_read_in_pipeline(gcs_emulator, gcs_bucket):
    _seed(gcs_emulator, gcs_bucket)
    b = gcs_bucket
    patterns = [f"gs://{b}/prefix/sub/**", f"gs://{b}/other/*"]
    expected = [
        (f"gs://{b}/{n}", len(d), d) for n, d in NESTED.items() if n.startswith("prefix/sub/") or n.startswith("other/")
    ]

    with BeamTestPipeline(runner=RUNNER) as p:
        contents = (
            p
            | beam.Create(patterns)
            | fileio.MatchAll()
            | fileio.ReadMatches()
            | beam.Map(lambda f: (f.metadata.path, f.metadata.size_in_bytes, f.read()))
        )
        assert_that(contents, equal_to(expected))


# -- subprocess ------------------------------------------------------------

_SUBPROCESS_CODE = textwrap.dedent("""
    import json, sys, time
    from apache_beam.io.filesystems import FileSystems
    t0 = time.time()  # after the imports, which a busy machine slows: the stall is in the first request
    bucket = sys.argv[1]
    (res,) = FileSystems.match([f"gs://{bucket}/prefix/**"])
    with FileSystems.create(f"gs://{bucket}/from-subprocess.txt") as f:
        f.write(b"written by child")
    print(json.dumps({
        "matched": sorted((m.path, m.size_in_bytes) for m in res.metadata_list),
        "gcs_seconds": time.time() - t0,
    }))
""")


def test_subprocess_uses_env_without_adc_stall(gcs_emulator, gcs_bucket):
    _seed(gcs_emulator, gcs_bucket)
    # Start from an environment *without* the fixture's variables so this
    # proves that `gcs_emulator.env` alone is sufficient.
    base = {k: v for k, v in os.environ.items() if k not in gcs_emulator.env}
    proc = subprocess.run(
        [sys.executable, "-c", _SUBPROCESS_CODE, gcs_bucket],
        env={**base, **gcs_emulator.env},
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Unable to find default credentials" not in proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [tuple(m) for m in out["matched"]] == sorted(
        (f"gs://{gcs_bucket}/{n}", len(d)) for n, d in NESTED.items() if n.startswith("prefix/")
    )
    assert gcs_emulator.read_bytes(f"gs://{gcs_bucket}/from-subprocess.txt") == b"written by child"
    # ADC retries would cost ~20 s; the child's requests must finish well inside 10 s.
    assert out["gcs_seconds"] < 10, f"the requests took {out['gcs_seconds']:.1f}s\n{proc.stderr}"


def test_a_dead_server_is_revived_on_its_port_with_its_environment():
    with GcsEmulator(start_timeout=SUBPROCESS_TIMEOUT) as emulator:
        env, port = emulator.env, emulator.port
        assert emulator.revive() is None  # running: left alone
        emulator._proc.kill()
        emulator._proc.wait()
        assert emulator.revive() == -9
        assert emulator.running and (emulator.env, emulator.port) == (env, port)
        emulator.create_bucket("after-revival")
        assert [b.name for b in emulator.client.list_buckets() if b.name == "after-revival"] == ["after-revival"]
