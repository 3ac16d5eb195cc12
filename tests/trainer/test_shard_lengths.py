"""The trainer checks each shard's records against the manifest's count as it reads them: a shard
cut short, replaced or appended to fails naming itself and both counts (the input functions raise,
the CLI prints one line and exits 2), instead of training on repeats or on records no count covers."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import tempfile

import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer import input_fn, manifest_io
from trainer.__main__ import main
from trainer.errors import IncompleteManifestError, ShardLengthError

# Counts at and around the edges of the check's batches, and any count up to a few batches.
_EDGES = [k * input_fn.COUNT_BATCH + d for k in range(4) for d in (-1, 0, 1) if k * input_fn.COUNT_BATCH + d >= 0]
_COUNTS = st.one_of(st.sampled_from(_EDGES), st.integers(0, 3 * input_fn.COUNT_BATCH + 2))


def write_shard(path, records, compression_type: str) -> None:
    with tf.io.TFRecordWriter(str(path), tf.io.TFRecordOptions(compression_type=compression_type)) as writer:
        for record in records:
            writer.write(record)


def assert_names_a_wrong_shard(message: str, wrong: dict[str, tuple[int, int]]) -> None:
    """`message` names one of the shards in `wrong` ({path: (held, said)}) with both its counts: the
    records it holds (at least, when it holds more, as the check stops at the first batch too many)
    and the manifest's."""
    path = next((p for p in wrong if message.startswith(f"{p} holds ")), None)
    assert path is not None, (message, wrong)
    held, said = wrong[path]
    counted = message[len(f"{path} holds ") :].split(" records, ")[0]
    assert f" records, the manifest says {said}:" in message, message
    if counted.startswith("at least "):
        assert said < int(counted.removeprefix("at least ")) <= held, message
    else:
        assert int(counted) == held, message


@settings(max_examples=40, deadline=None)
@given(
    shards=st.lists(st.tuples(_COUNTS, st.booleans(), _COUNTS), min_size=1, max_size=3),
    compression_type=st.sampled_from(["GZIP", ""]),
    training=st.booleans(),
    pipelines=st.integers(1, 3),
)
def test_each_shard_is_read_whole_or_fails_naming_itself_and_both_counts(shards, compression_type, training, pipelines):
    """Shards holding the records the manifest says, or not (around the check's batch edges), read
    by 1 to 3 input pipelines (files assigned by count, or every file read by each): all records
    once when every count is right; otherwise some pipeline fails, naming a wrong shard."""
    with tempfile.TemporaryDirectory() as folder:
        paths, lengths, wrong, expected = [], [], {}, []
        for i, (held, honest, other) in enumerate(shards):
            path, said = os.path.join(folder, f"shard-{i}"), held if honest else other
            records = [f"{i}:{r}".encode() for r in range(held)]
            write_shard(path, records, compression_type)
            paths.append(path)
            lengths.append(said)
            expected += records
            if held != said:
                wrong[path] = (held, said)
        read, failures = [], []
        for pipeline in range(pipelines):
            dataset = input_fn.record_dataset(
                paths,
                training=training,
                repeat=False,
                seed=1,
                input_context=tf.distribute.InputContext(pipelines, pipeline, pipelines),
                lengths=lengths,
                compression_type=compression_type,
            )
            try:
                read += list(dataset.as_numpy_iterator())
            except tf.errors.InvalidArgumentError as e:
                failures.append(ShardLengthError.from_op_error(e))
                assert failures[-1] is not None, e.message
                assert_names_a_wrong_shard(str(failures[-1]), wrong)
        if wrong:
            assert failures
        else:
            assert sorted(read) == sorted(expected)


def test_shard_lengths_that_do_not_match_the_shards_are_refused(tmp_path):
    write_shard(tmp_path / "shard", [b"a", b"b"], "GZIP")
    with pytest.raises(IncompleteManifestError, match="2 shard lengths for 1 shards"):
        input_fn.record_dataset([str(tmp_path / "shard")], training=False, lengths=[1, 1])


def _rewrite(data: pathlib.Path, split: str, how: str) -> tuple[str, int, int]:
    """Replaces the last shard of `split` by one holding fewer records, or its records and a few
    again (`how`), written by TensorFlow itself. The shard's name, the records it now holds and
    the manifest's count."""
    manifest = json.loads((data / "manifest.json").read_text())
    shard, said = manifest["splits"][split]["shards"][-1], manifest["splits"][split]["shard_lengths"][-1]
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(data / shard), compression_type="GZIP")]
    assert len(records) == said
    records = records[: said // 2] if how == "fewer" else records + records[:5]
    write_shard(data / shard, records, "GZIP")
    return shard, len(records), said


@pytest.mark.parametrize("how", ["fewer", "more"])
def test_an_image_shard_with_other_records_than_the_manifest_says_stops_training(image_dataset, tmp_path, capsys, how):
    data = pathlib.Path(shutil.copytree(image_dataset, tmp_path / "data"))
    shard, held, said = _rewrite(data, "train", how)
    wrong = {str(data / shard): (held, said)}
    manifest = manifest_io.load_manifest(str(data))
    dataset = input_fn.image_dataset(str(data), manifest, "train", 16, image_size=16, training=True, seed=1)
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        for _ in dataset.take(3 * manifest.splits["train"].records // 16):
            pass
    assert_names_a_wrong_shard(str(ShardLengthError.from_op_error(e.value)), wrong)

    argv = ["--data", data, "--model_dir", tmp_path / "model", "--image_size", "16", "--batch_size", "16"]
    code = main([str(a) for a in [*argv, "--steps", "60", "--no_export"]])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1, errors
    assert_names_a_wrong_shard(errors[0].removeprefix("error: "), wrong)


def test_a_short_tabular_shard_fails_its_input_function(tabular_dataset, tmp_path):
    data = pathlib.Path(shutil.copytree(tabular_dataset, tmp_path / "data"))
    shard, held, said = _rewrite(data, "train", "fewer")
    manifest = manifest_io.load_manifest(str(data))
    dataset = input_fn.tabular_dataset(str(data), manifest, "train", 8, label="label", training=False)
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        for _ in dataset:
            pass
    assert_names_a_wrong_shard(str(ShardLengthError.from_op_error(e.value)), {str(data / shard): (held, said)})
