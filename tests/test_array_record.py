"""`--format array_record`: the records of a TFRecord run, in ArrayRecord shards of the same names
(`.array_record`), counts and manifest, read back before publication; Grain and TFDS read them with
random access; `inspect --verify` reads them; a corrupt shard is caught, a rejected run leaves none,
and the trainer refuses them in one line."""

from __future__ import annotations

import json
import pathlib
import shutil

import grain
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import transforms.shard_parts
from core import array_record_files
from core.array_record_files import WRITER_OPTIONS, ArrayRecordError
from core.contract.layout import ARRAY_RECORD, SHARD_PARTS_FOLDER, TFRECORD
from core.contract.manifest import Manifest
from core.tfrecord_framing import framed
from pipeline import shard_check
from pipeline.cli import main
from pipeline.commands import inspect
from pipeline.folder_store import referenced
from pipeline.shard_check import ShardCount, count_shard
from tests import broken_images
from tests.dataset_reader import array_records, load_manifest, load_rejected, read_split
from tests.portable_stack import KINDS, contents
from tests.test_end_to_end_gcs import download_dataset, small_sample
from tests.test_publication import photos
from trainer import manifest_io
from trainer.errors import FileFormatError
from transforms.shard_parts import ShardLayout, transcode_shard

ARRAY = ["--format", "array_record"]
SHARDS = ["--num_shards", "2"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[pathlib.Path, pathlib.Path]]:
    """Each kind of the bundled sample converted twice, to TFRecords and to ArrayRecords:
    {kind: (tfrecord dataset, array_record dataset)}."""
    tmp = tmp_path_factory.mktemp("array_record")
    found = {}
    for kind, (args, _) in KINDS.items():
        pair = tmp / kind / "tfrecord", tmp / kind / "array_record"
        assert main([*args, *SHARDS, "--output", str(pair[0])]) == 0
        assert main([*args, *SHARDS, "--output", str(pair[1]), *ARRAY]) == 0
        found[kind] = pair
    return found


@pytest.mark.parametrize("kind", list(KINDS))
def test_array_record_shards_hold_the_records_of_a_tfrecord_run(runs, kind):
    """Same records by key feature (source file, CSV id), same manifest but for how the shards are
    stored, every shard an ArrayRecord file of the records the manifest says, written with
    group_size:1 (load_manifest also validates the manifest against the package's schema)."""
    tfrecord, array_record = runs[kind]
    key = KINDS[kind][1]
    records, summary = contents(array_record, key)
    expected_records, expected_summary = contents(tfrecord, key)
    assert records == expected_records and sum(map(len, records.values())) > 0
    for stored_as in ("compression", "file_format", "array_record_options", "metadata_files"):
        del summary[stored_as], expected_summary[stored_as]
    for body in (summary, expected_summary):
        del body["options"]["format"], body["options"]["compression"]
        for split in body["splits"].values():  # the same names but for their suffix
            split["shards"] = [shard.split(".")[0] for shard in split["shards"]]
    assert summary == expected_summary

    manifest = load_manifest(array_record)
    assert (manifest.file_format, manifest.compression, manifest.array_record_options) == (
        ARRAY_RECORD,
        "NONE",
        WRITER_OPTIONS,
    )
    assert json.loads((array_record / "manifest.json").read_text())["format_version"] == 4
    assert json.loads((tfrecord / "manifest.json").read_text())["format_version"] == 3
    for name, split in manifest.splits.items():
        assert split.shards == tuple(f"{name}-{i:05d}-of-00002.array_record" for i in range(2))
        for shard, length in zip(split.shards, split.shard_lengths, strict=True):
            reader = array_record_files._module().ArrayRecordReader(str(array_record / shard))
            assert reader.num_records() == length
            assert reader.writer_options_string().startswith("group_size:1,")
            reader.close()
    assert sorted(p.name for p in array_record.iterdir()) == sorted(referenced(manifest))
    assert not (array_record / SHARD_PARTS_FOLDER).exists()


def _by_source(records: list[dict], key: str = "image/source_id") -> dict:
    return {record[key]: record for record in records}


def test_grain_reads_every_record_with_random_access_and_shuffles_them(runs):
    """Grain's ArrayRecordDataSource over a split's shards: its length is the manifest's count,
    any record at any index parses to the record the TFRecord run holds for its source, and a
    shuffled MapDataset gives every record once, in another order."""
    tfrecord, array_record = runs["images"]
    manifest = load_manifest(array_record)
    spec = {
        "image/source_id": tf.io.FixedLenFeature([], tf.string),
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
    }
    for name, split in manifest.splits.items():
        expected = _by_source(read_split(tfrecord, name))
        source = grain.sources.ArrayRecordDataSource([str(array_record / shard) for shard in split.shards])
        assert len(source) == split.records == len(expected)
        for index in (len(source) - 1, 0, len(source) // 2, 7):
            parsed = tf.io.parse_single_example(source[index], spec)
            assert parsed["image/encoded"].numpy() == expected[parsed["image/source_id"].numpy()]["image/encoded"]
        in_order = array_records([str(array_record / shard) for shard in split.shards])
        shuffled = list(grain.MapDataset.source(source).shuffle(seed=7))
        assert sorted(shuffled) == sorted(in_order) and shuffled != in_order


def test_tfds_data_source_reads_the_records_of_the_tfrecord_run(runs):
    """tfds.builder_from_directory over the dataset's TFDS metadata, then as_data_source: random
    access, per split the manifest's counts, each record the TFRecord run's for its source."""
    tfds = pytest.importorskip("tensorflow_datasets")
    tfrecord, array_record = runs["images"]
    manifest = load_manifest(array_record)
    assert set(manifest.metadata_files) >= {"dataset_info.json", "features.json"}
    builder = tfds.builder_from_directory(str(array_record))
    assert builder.info.file_format.value == ARRAY_RECORD
    for name, split in manifest.splits.items():
        expected = _by_source(read_split(tfrecord, name))
        source = builder.as_data_source(split=name)
        assert len(source) == split.records and builder.info.splits[name].shard_lengths == list(split.shard_lengths)
        read = {}
        for index in reversed(range(len(source))):
            image = source[index]["image"]
            read[image["source_id"]] = (image["encoded"], int(image["class"]["label"]))
        assert read == {
            source_id: (record["image/encoded"], record["image/class/label"]) for source_id, record in expected.items()
        }


def test_inspect_verify_reads_array_record_shards_and_names_a_corrupt_one(runs, tmp_path, capsys):
    copy = pathlib.Path(shutil.copytree(runs["csv"][1], tmp_path / "copy"))
    assert inspect.main([str(copy), "--verify"]) == 0
    assert "hash-checked and parsed" in capsys.readouterr().out
    shard = copy / load_manifest(copy).splits["train"].shards[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 8] ^= 0x40  # inside the first records' chunks
    shard.write_bytes(bytes(data))
    assert inspect.main([str(copy), "--verify"]) == 1
    out = capsys.readouterr().out
    assert f"{shard.name}: record " in out and "hash mismatch" in out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.floats(0.0, 0.999), flip=st.booleans())
def test_a_cut_shard_is_found_and_a_flipped_byte_never_changes_a_record_unseen(runs, tmp_path, at, flip):
    """A shard cut short anywhere is a ShardCount with a reason. A byte flipped anywhere is one too,
    or else every record still reads as written: the byte was one no reader uses (a block header
    that reading by the file's own index skips, padding)."""
    shard = next((runs["images"][1]).glob("train-00000-*.array_record"))
    records = list(array_record_files.read_records(str(shard), inside=None))
    assert count_shard(str(shard), "NONE", False, ARRAY_RECORD) == ShardCount(shard.name, len(records))
    data = bytearray(shard.read_bytes())
    if flip:
        data[int(at * len(data))] ^= 0x01
    else:
        data = data[: int(at * len(data))]
    broken = tmp_path / shard.name
    broken.write_bytes(bytes(data))
    counted = count_shard(str(broken), "NONE", False, ARRAY_RECORD)
    if counted.error or not flip:
        assert counted.error and counted.records < len(records)
    else:
        assert list(array_record_files.read_records(str(broken), inside=None)) == records


def test_shards_read_back_in_processes_of_their_own_count_as_here(runs, tmp_path, monkeypatch):
    """The read-back of a local run's large shards (pipeline.shard_check.count_shards) gives each
    process the file format too: whole and broken ArrayRecord shards count as they do here."""
    monkeypatch.setattr(shard_check, "IN_PROCESSES_FROM_BYTES", 0)  # these shards are small
    shards = sorted(str(p) for p in runs["csv"][1].glob("*.array_record"))
    broken = tmp_path / "train-00000-of-00002.array_record"
    broken.write_bytes(pathlib.Path(shards[0]).read_bytes()[:-10])
    paths = [*shards, str(broken)]
    here = [count_shard(path, "NONE", False, ARRAY_RECORD) for path in paths]
    in_processes = shard_check.count_shards(paths, "NONE", False, 2, file_format=ARRAY_RECORD)
    assert sorted(in_processes, key=repr) == sorted(here, key=repr)
    assert here[-1].error and not any(c.error for c in here[:-1])


def test_a_shard_corrupted_before_the_read_back_rejects_the_run(tmp_path, monkeypatch):
    """The read-back reads every record of every ArrayRecord shard: one whose chunk was damaged
    after it was written rejects the run, which then leaves no shard."""
    written = transforms.shard_parts.transcode_shard

    def damaged(layout, split, index, parts):
        path = written(layout, split, index, parts)
        if split == "train" and index == 0:
            data = bytearray(pathlib.Path(path).read_bytes())
            data[200] ^= 0x01
            pathlib.Path(path).write_bytes(bytes(data))
        return path

    monkeypatch.setattr(transforms.shard_parts, "transcode_shard", damaged)
    source, out = photos(tmp_path / "src", 4), tmp_path / "out"
    assert main(["--input", str(source), "--output", str(out), *SHARDS, *ARRAY]) == 1
    reasons = load_rejected(out).rejected
    assert any(r.startswith("shard train-00000-of-00002.array_record cannot be read: record ") for r in reasons)
    assert not list(out.rglob("*.array_record")) and not (out / SHARD_PARTS_FOLDER).exists()


def test_a_rejected_run_leaves_no_shard(tmp_path):
    source, out = photos(tmp_path / "src", 4), tmp_path / "out"
    (source / "circle" / "broken.jpg").write_bytes(broken_images.html_page())
    assert main(["--input", str(source), "--output", str(out), *ARRAY, "--max_error_fraction", "0"]) == 1
    rejected = load_rejected(out)
    assert rejected.file_format == ARRAY_RECORD and rejected.rejected
    assert not list(out.rglob("*.array_record")) and not (out / SHARD_PARTS_FOLDER).exists()


def test_an_overwrite_in_the_other_format_leaves_only_the_new_dataset(runs, tmp_path):
    out = pathlib.Path(shutil.copytree(runs["images"][0], tmp_path / "out"))
    argv = ["--input", KINDS["images"][0][1], "--output", str(out), *SHARDS, "--overwrite"]
    assert main([*argv, *ARRAY]) == 0
    manifest = load_manifest(out)
    named = {shard for split in manifest.splits.values() for shard in split.shards}
    files = {p.name for p in out.iterdir()}
    assert files == named | {"manifest.json", *manifest.report_files, *manifest.metadata_files}
    assert main([*argv, "--format", "tfrecord"]) == 0
    assert not list(out.glob("*.array_record")) and load_manifest(out).file_format == TFRECORD


def test_array_record_shards_on_gcs(gcs_emulator, gcs_bucket, tmp_path):
    """gs:// output: each shard written locally and uploaded whole, read back through a local copy;
    the records are those of the same conversion to local TFRecords; inspect --verify reads them
    from the bucket."""
    local = small_sample(tmp_path)
    gcs_emulator.upload_dir(local, f"gs://{gcs_bucket}/raw")
    out = f"gs://{gcs_bucket}/array_record"
    assert main(["--input", f"gs://{gcs_bucket}/raw", "--output", out, *ARRAY, "--max_error_fraction", "0.5"]) == 0
    assert inspect.main([out, "--verify"]) == 0
    dataset = download_dataset(gcs_emulator, out, tmp_path / "dl")
    manifest = load_manifest(dataset)
    assert manifest.file_format == ARRAY_RECORD and manifest.counts.written == 24
    seen = 0
    for split in manifest.splits:
        for record in read_split(dataset, split):
            key = record["image/filename"].decode().removeprefix(f"gs://{gcs_bucket}/raw/")
            assert record["image/encoded"] == (local / key).read_bytes()
            seen += 1
    assert seen == 24


def test_a_refresh_publishes_an_array_record_version(tmp_path):
    source, root = photos(tmp_path / "src", 4), tmp_path / "root"
    assert main(["refresh", "--input", str(source), "--output", str(root), *ARRAY]) == 0
    version = root / (root / "LATEST").read_text().strip()
    manifest = load_manifest(version)
    assert manifest.file_format == ARRAY_RECORD
    train = manifest.splits["train"]
    assert len(array_records([str(version / shard) for shard in train.shards])) == train.records > 0


def test_every_bundle_run_twice_commits_what_a_normal_run_does(runs, tmp_path):
    """As tests/test_retry_safety.py, with ArrayRecord shards: on the parallel runner (records
    grouped by shard, shards transcoded side by side) each bundle run once more first, every side
    effect of both attempts kept."""
    args, key = KINDS["images"]
    normal, repeated = runs["images"][1], tmp_path / "repeated"
    repeat = ["--direct_num_workers", "2", "--direct_runner_bundle_repeat", "1"]
    assert main([*args, *SHARDS, *ARRAY, "--output", str(repeated), *repeat]) == 0
    assert contents(repeated, key) == contents(normal, key)
    assert sorted(p.name for p in repeated.iterdir()) == sorted(p.name for p in normal.iterdir())


def _parts(tmp_path: pathlib.Path, payloads: list[list[bytes]]) -> tuple[ShardLayout, list[str]]:
    layout = ShardLayout(str(tmp_path), {"train": 1}, "NONE", ARRAY_RECORD)
    layout.make_parts_folder()
    paths = []
    for number, part in enumerate(payloads):
        path = layout.part_path("train", 0, f"attempt{number}")
        pathlib.Path(path).write_bytes(b"".join(piece for payload in part for piece in framed(payload)))
        paths.append(path)
    return layout, paths


def test_a_repeated_transcoding_writes_the_same_shard(tmp_path):
    """A retried step transcodes again from the same parts, which stay until every shard is
    written, and writes the same file. Records keep the parts' order."""
    payloads = [[b"a" * 10, b"b"], [], [b"c" * 70_000]]
    layout, paths = _parts(tmp_path, payloads)
    saved = {path: pathlib.Path(path).read_bytes() for path in paths}
    shard = pathlib.Path(transcode_shard(layout, "train", 0, paths))
    first = shard.read_bytes()
    assert {path: pathlib.Path(path).read_bytes() for path in paths} == saved
    assert transcode_shard(layout, "train", 0, paths) == str(shard) and shard.read_bytes() == first
    assert list(array_record_files.read_records(str(shard), inside=None)) == [b"a" * 10, b"b", b"c" * 70_000]
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_damaged_part_fails_the_transcoding(tmp_path):
    """A part whose framing or CRC does not hold fails the step (the runner retries it, then the
    job fails), naming the part; no shard is left half written."""
    layout, [path] = _parts(tmp_path, [[b"record one", b"record two"]])
    data = bytearray(pathlib.Path(path).read_bytes())
    data[-1] ^= 0x01
    pathlib.Path(path).write_bytes(bytes(data))
    with pytest.raises(OSError, match=f"shard part {path}: corrupt or truncated record"):
        transcode_shard(layout, "train", 0, [path])
    assert not list(tmp_path.glob("*.array_record")) and not list(tmp_path.glob(".*.tmp"))


def test_an_empty_shard_is_a_valid_array_record_file(tmp_path):
    path = str(tmp_path / "train-00000-of-00001.array_record")
    assert array_record_files.write_shard(path, []) == 0
    assert list(array_record_files.read_records(path, inside=None)) == []
    pathlib.Path(path).write_bytes(b"not an ArrayRecord file")
    with pytest.raises(ArrayRecordError, match="not a whole ArrayRecord file"):
        list(array_record_files.read_records(path, inside=None))


@pytest.mark.parametrize(
    "argv, line",
    [
        (
            [*ARRAY, "--compression", "gzip"],
            "flag --compression: does not apply to format array_record, whose files compress their chunks "
            "themselves: leave it out or set none, got 'gzip' (a string)",
        ),
        (
            [*ARRAY, "--index"],
            "flag --index: does not apply to format array_record, whose files hold their own index of records, "
            "got True",
        ),
    ],
)
def test_contradictory_settings_are_refused_in_one_line(tmp_path, caplog, argv, line):
    out = tmp_path / "out"
    assert main(["--input", KINDS["images"][0][1], "--output", str(out), *argv]) == 2
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [line]
    assert not out.exists()


def test_a_config_file_asks_for_array_record_with_compression_left_to_it(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("format: array_record\n")
    out = tmp_path / "out"
    assert main([*KINDS["csv"][0], "--output", str(out), "--config", str(config)]) == 0
    manifest = load_manifest(out)
    assert (manifest.file_format, manifest.compression, manifest.options["compression"]) == (
        ARRAY_RECORD,
        "NONE",
        "none",
    )


def test_the_trainer_refuses_array_record_shards_in_one_line(runs):
    with pytest.raises(FileFormatError, match="its shards are array_record files, and the trainer reads TFRecords"):
        manifest_io.load_manifest(str(runs["images"][1]))


def test_a_manifest_without_file_format_reads_as_tfrecord(runs):
    body = json.loads((runs["images"][0] / "manifest.json").read_text())
    del body["file_format"], body["array_record_options"]
    manifest = Manifest.from_json(json.dumps(body))
    assert manifest.file_format == TFRECORD and manifest.format_version == 3
