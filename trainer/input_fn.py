"""tf.data input pipelines over the pipeline's TFRecord shards (GZIP or not, as the manifest
says), built the way the TPU reference readers build them:

    shard files (from the manifest) -> [shard(num_input_pipelines, index)] -> shuffle files -> repeat
    -> interleave(TFRecordDataset(compression, buffer_size), parallel, non-deterministic when training;
                  each shard's records checked against the manifest's count for it as they are read)
    -> shuffle(records) -> batch -> parse_example (one op per batch, not one per record)
    -> crop + decode (only the crop of a JPEG) + resize to a fixed size -> batch(drop_remainder=True)
    -> prefetch(AUTOTUNE)

Evaluation reads the same way without shuffling and in a deterministic order, and with `padded`
covers every record of the split: the last batches are filled with zero-weight elements, so that
every batch keeps its static shape and every replica runs the same steps (`evaluation_steps`). Batch
sizes given here are per input pipeline / per replica (`InputContext.get_per_replica_batch_size`);
every batch has a static shape, as XLA and TPUs require.

Images come out as uint8 [B, S, S, 3] (the models cast and rescale on the device: a quarter of the
bytes of float32 to batch on the host and to feed to a TPU or GPU), labels as int32 [B]. Tabular
records come out as ({column: [B] tensor of the manifest's dtype}, label [B]); missing values of
optional columns take a default (0, 0.0 or ""). Padded evaluation batches add float32 weights [B]:
1 for a record, 0 for filling.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Sequence

import tensorflow as tf

from core.contract.features import parse_spec
from core.contract.manifest import Manifest
from core.contract.readers import assign_shards
from trainer import manifest_io
from trainer.errors import (
    BatchSizeError,
    IncompleteManifestError,
    LabelError,
    MissingFeatureError,
    ShardLengthError,
    TrainerError,
)
from trainer.flags import CENTER_CROP_FRACTION, DEFAULT_SHUFFLE_BUFFER, EVAL_CROPS, TRAIN_CROPS

_LOG = logging.getLogger(__name__)

AUTOTUNE = tf.data.AUTOTUNE
READ_BUFFER_BYTES = 8 * 1024 * 1024  # per open shard: large sequential reads (GCS likes them)
MAX_CYCLE_LENGTH = 16  # shards read at once per input pipeline
PARSE_BATCH = 256  # records per parse_example call when decoding unbatched
# Records per check of a shard's count (read_shard): a check per record would slow small records;
# each shard being read holds one such batch in memory.
COUNT_BATCH = 64


# --------------------------------------------------------------------------------------------
# Shared: files -> records


def _num_pipelines(input_context: tf.distribute.InputContext | None) -> tuple[int, int, int]:
    """(num_input_pipelines, input_pipeline_id, num_replicas_in_sync)."""
    if input_context is None:
        return 1, 0, 1
    return input_context.num_input_pipelines, input_context.input_pipeline_id, input_context.num_replicas_in_sync


def check_batch_size(manifest: Manifest, split: str, global_batch_size: int) -> int:
    """Full batches per pass over `split` (the steps of an epoch); BatchSizeError if there are none."""
    records = manifest_io.split_info(manifest, split).records
    if global_batch_size <= 0:
        raise BatchSizeError(f"batch size must be positive, got {global_batch_size}")
    if global_batch_size > records:
        raise BatchSizeError(
            f"global batch size {global_batch_size} is larger than the {split!r} split "
            f"({records} records): lower --batch_size"
        )
    return records // global_batch_size


def pipeline_records(manifest: Manifest, split: str, num_pipelines: int) -> list[int]:
    """The most records each of `num_pipelines` input pipelines reads of one pass over `split`, as
    record_dataset shares the shards out: exact where the manifest has shard_lengths (or records are
    shared), the whole split where files are shared without known lengths (older manifests)."""
    info = manifest_io.split_info(manifest, split)
    if num_pipelines <= 1:
        return [info.records]
    if len(info.shards) < num_pipelines:  # records shared round robin
        return [-(-(info.records - i) // num_pipelines) for i in range(num_pipelines)]
    if info.shard_lengths:
        return [sum(info.shard_lengths[i] for i in mine) for mine in assign_shards(info.shard_lengths, num_pipelines)]
    return [info.records] * num_pipelines


def evaluation_steps(manifest: Manifest, split: str, batch_size: int, input_context=None) -> int:
    """Steps of one padded evaluation of `split` (`batch_size` per replica): each replica's steps
    take a batch of its input pipeline's, so the pipeline with the most records sets the count, and
    the others fill their last batches with zero-weight elements (padded_batches)."""
    num_pipelines, _, replicas = _num_pipelines(input_context)
    per_step = batch_size * max(1, replicas // num_pipelines)  # records a pipeline gives each step
    return max(1, max(-(-records // per_step) for records in pipeline_records(manifest, split, num_pipelines)))


def padded_batches(elements: tf.data.Dataset, batch_size: int, batches: int) -> tf.data.Dataset:
    """`batches` batches of `batch_size` of (*element, weight): each of `elements` with weight 1,
    then zero elements of weight 0 to fill them, so that every record is evaluated and every batch
    has the static shape a TPU needs, where drop_remainder would leave the last records out."""
    weighted = elements.map(lambda *element: (*element, tf.constant(1.0)))
    filler = tf.nest.map_structure(lambda spec: tf.zeros(spec.shape, spec.dtype), weighted.element_spec)
    filler = (*filler[:-1], tf.constant(0.0))
    filling = tf.data.Dataset.from_tensors(filler).repeat()
    return weighted.concatenate(filling).batch(batch_size, drop_remainder=True).take(batches)


def _files(paths: list[str], lengths: list[int]) -> tf.data.Dataset:
    """The shards to read: (path, records) pairs where the records are known, else paths."""
    return tf.data.Dataset.from_tensor_slices((paths, tf.constant(lengths, tf.int64)) if lengths else paths)


def read_shard(path: tf.Tensor, expected: tf.Tensor | None = None, *, compression_type: str) -> tf.data.Dataset:
    """One shard's records; with `expected` (the manifest's count for it), checked against it as
    they are read: a shard holding fewer or more (cut short, replaced or appended to after the
    conversion) fails with an InvalidArgumentError naming it and both counts
    (ShardLengthError.from_op_error), where it would otherwise be trained on short or with repeats."""
    records = tf.data.TFRecordDataset(path, compression_type=compression_type, buffer_size=READ_BUFFER_BYTES)
    if expected is None:
        return records
    # Checked a batch at a time; an empty batch after the last marks the end of the file.
    end = tf.data.Dataset.from_tensors(tf.constant([], tf.string))
    batches = records.batch(COUNT_BATCH).concatenate(end).enumerate()

    def check(k, batch):
        size = tf.size(batch, out_type=tf.int64)
        seen = k * COUNT_BATCH + size  # records up to this batch's end: every batch but the last is full
        full = tf.equal(size, COUNT_BATCH)
        ok = tf.where(
            full,
            seen <= expected,  # more may follow
            # A short batch ends the file. After one, the empty batch's `seen` overshoots and passes;
            # after a full one, it is the count (no more than expected, as that batch passed).
            tf.where(size > 0, tf.equal(seen, expected), seen >= expected),
        )
        message = tf.strings.join(
            [
                ShardLengthError.MARK,
                path,
                tf.where(full, " holds at least ", " holds "),
                tf.strings.as_string(seen),
                " records, the manifest says ",
                tf.strings.as_string(expected),
            ]
        )
        with tf.control_dependencies([tf.debugging.Assert(ok, [message])]):
            return tf.identity(batch)

    return batches.map(check).unbatch()


def record_dataset(
    paths: Sequence[str],
    *,
    training: bool,
    input_context=None,
    seed: int | None = None,
    repeat: bool | None = None,
    shuffle_buffer: int = 0,
    lengths: Sequence[int] = (),
    compression_type: str = "GZIP",
) -> tf.data.Dataset:
    """Serialized Examples of the given shards, this input pipeline's share of them: files
    shuffled and read interleaved in a non-deterministic order when training, then records
    shuffled in a buffer of `shuffle_buffer`; read round-robin in a fixed order otherwise.
    Training data repeats (unless `repeat=False`). `lengths`: the records of each file (the
    manifest's shard_lengths), to give every pipeline a near-equal share of records, and checked
    as each file is read (read_shard); none (older manifests, paths given by hand): not checked.
    `compression_type`: the manifest's (Manifest.tf_compression_type)."""
    num_pipelines, pipeline_id, _ = _num_pipelines(input_context)
    paths, lengths = list(paths), list(lengths)
    if lengths and len(lengths) != len(paths):
        raise IncompleteManifestError(f"the manifest lists {len(lengths)} shard lengths for {len(paths)} shards")
    files = _files(paths, lengths)
    shard_records = False
    if num_pipelines > 1:
        if len(paths) >= num_pipelines and lengths:
            mine = assign_shards(lengths, num_pipelines)[pipeline_id]
            files = _files([paths[i] for i in mine], [lengths[i] for i in mine])
        elif len(paths) >= num_pipelines:
            # Before shuffling, so every pipeline gets a disjoint, fixed subset of the files.
            files = files.shard(num_pipelines, pipeline_id)
        else:
            _LOG.warning(
                "%d shard file(s) for %d input pipelines: sharding records instead of files "
                "(each pipeline reads every file); convert with --reader_hosts %d for efficient reads",
                len(paths),
                num_pipelines,
                num_pipelines,
            )
            shard_records = True
    n_files = int(files.cardinality())
    # Sharding records needs the same record order in every pipeline: no file shuffle, fixed order.
    deterministic = not training or shard_records
    if training and not shard_records:
        files = files.shuffle(max(n_files, 1), seed=seed, reshuffle_each_iteration=True)
    if training if repeat is None else repeat:
        files = files.repeat()
    records = files.interleave(
        functools.partial(read_shard, compression_type=compression_type),
        cycle_length=max(1, min(n_files, MAX_CYCLE_LENGTH)),
        block_length=1,
        num_parallel_calls=AUTOTUNE,
        deterministic=deterministic,
    )
    if shard_records:
        records = records.shard(num_pipelines, pipeline_id)
    if training and shuffle_buffer > 1:
        records = records.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    return records


def _finish(dataset: tf.data.Dataset, training: bool) -> tf.data.Dataset:
    options = tf.data.Options()
    options.deterministic = not training
    options.experimental_optimization.map_parallelization = True
    # We shard by hand (file level); never let a strategy re-shard the already sharded data.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return dataset.prefetch(AUTOTUNE).with_options(options)


# --------------------------------------------------------------------------------------------
# Images


_RATIOS = (1, 2, 4, 8)  # the DCT scalings libjpeg decodes at


@dataclasses.dataclass(frozen=True)
class Augmentation:
    """How a record's image becomes image_size x image_size. The defaults are the TPU reference
    ResNet preprocessing's (`_decode_and_random_crop` + flip for training, a central crop for
    evaluation); "none" resizes the whole image."""

    train_crop: str = "random"  # one of TRAIN_CROPS
    eval_crop: str = "center"  # one of EVAL_CROPS
    flip: bool = True  # random left-right flip when training
    area_range: tuple[float, float] = (0.08, 1.0)  # random crop: fraction of the image's area
    aspect_ratio_range: tuple[float, float] = (3 / 4, 4 / 3)
    min_object_covered: float = 0.1
    max_attempts: int = 10  # then the center crop, as the reference falls back
    center_fraction: float = CENTER_CROP_FRACTION

    def __post_init__(self):
        if self.train_crop not in TRAIN_CROPS:
            raise TrainerError(f"train crop {self.train_crop!r} is not one of {TRAIN_CROPS}")
        if self.eval_crop not in EVAL_CROPS:
            raise TrainerError(f"eval crop {self.eval_crop!r} is not one of {EVAL_CROPS}")
        if not 0 < self.center_fraction <= 1:
            raise TrainerError(f"center crop fraction {self.center_fraction} is not in (0, 1]")
        low, high = self.area_range
        if not 0 < low <= high <= 1:
            raise TrainerError(f"crop area range {self.area_range} is not within (0, 1]")


def _center_window(height: tf.Tensor, width: tf.Tensor, fraction: float) -> tf.Tensor:
    """[y, x, h, w]: the central square of `fraction` of the short side (the reference's offsets)."""
    side = tf.maximum(tf.cast(fraction * tf.cast(tf.minimum(height, width), tf.float32), tf.int32), 1)
    return tf.stack([(height - side + 1) // 2, (width - side + 1) // 2, side, side])


def crop_window(shape: tf.Tensor, crop: str, settings: Augmentation, seed: int | None) -> tf.Tensor:
    """[y, x, h, w] of the region of an image of `shape` ([h, w, c]) the model will see."""
    height, width = shape[0], shape[1]
    if crop == "none":
        return tf.stack([0, 0, height, width])
    center = _center_window(height, width, settings.center_fraction)
    if crop == "center":
        return center
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        shape,
        bounding_boxes=tf.constant([[[0.0, 0.0, 1.0, 1.0]]]),
        seed=seed or 0,
        min_object_covered=settings.min_object_covered,
        aspect_ratio_range=settings.aspect_ratio_range,
        area_range=settings.area_range,
        max_attempts=settings.max_attempts,
        use_image_if_no_bounding_boxes=True,
    )
    # No box found in max_attempts: the sampler returns the whole image; the reference then
    # takes the center crop instead.
    whole = tf.logical_and(tf.equal(size[0], height), tf.equal(size[1], width))
    return tf.where(whole, center, tf.stack([begin[0], begin[1], size[0], size[1]]))


def _ratio_index(short_side: tf.Tensor, image_size: int) -> tf.Tensor:
    """k such that decoding at ratio 2**k (<= 8) keeps short_side / ratio >= image_size."""
    return tf.reduce_sum(tf.cast(short_side // tf.constant(_RATIOS[1:]) >= image_size, tf.int32))


def usable_ratios(image_size: int, max_short_side: int | None = None) -> tuple[int, ...]:
    """The DCT ratios a window can be decoded at: all of them, or where no stored image's shorter
    side exceeds `max_short_side` (manifest_io.StoredImages), those that keep image_size of it."""
    if max_short_side is None:
        return _RATIOS
    return tuple(ratio for ratio in _RATIOS if ratio == 1 or max_short_side // ratio >= image_size)


def decode_window(encoded: tf.Tensor, window: tf.Tensor, image_size: int, ratios: Sequence[int] = _RATIOS) -> tf.Tensor:
    """The `window` ([y, x, h, w]) of a JPEG, uint8 [h', w', 3]: only that window is decoded
    (`decode_and_crop_jpeg`), at the largest DCT scaling that keeps its short side >= image_size
    (h' = h // ratio), of `ratios` (usable_ratios): with only 1, there is no choice to make."""

    def at(ratio: int):
        return lambda: tf.io.decode_and_crop_jpeg(encoded, window // ratio, channels=3, ratio=ratio)

    if len(ratios) == 1:
        return at(1)()
    index = tf.minimum(_ratio_index(tf.minimum(window[2], window[3]), image_size), len(ratios) - 1)
    return tf.switch_case(index, [at(ratio) for ratio in ratios])


def resized(image: tf.Tensor, image_size: int, *, may_fit: bool = True) -> tf.Tensor:
    """uint8 [h, w, 3] -> uint8 [image_size, image_size, 3], bilinear (half-pixel centers), rounded
    half up. Bilinear weights are non-negative and sum to one, so resizing the levels plus one half
    and truncating rounds them, within 0..255 without clipping; TF's kernel is faster on float32
    than on uint8. With `may_fit`, a window already of that size is returned as it is (resizing it
    is the identity): center crops of images stored at the size the model reads often are; a
    random window rarely is, and the test would cost every image more than it saves."""

    def bilinear():
        levels = tf.image.resize(tf.cast(image, tf.float32) + 0.5, [image_size, image_size], method="bilinear")
        return tf.cast(levels, tf.uint8)

    if not may_fit:
        return bilinear()
    same = tf.reduce_all(tf.equal(tf.shape(image)[:2], image_size))
    return tf.cond(same, lambda: image, bilinear)


def preprocess_image(
    encoded: tf.Tensor,
    image_size: int,
    *,
    crop: str = "none",
    flip: bool = False,
    settings: Augmentation | None = None,
    seed: int | None = None,
    stored: manifest_io.StoredImages | None = None,
) -> tf.Tensor:
    """One encoded image -> uint8 [image_size, image_size, 3]: crop (`crop`: "random", "center"
    or "none"), bilinear resize, rounded, optionally a random flip.

    JPEGs are cropped before decoding, from their header's shape, and decoded at a reduced DCT
    scale when the window is at least twice `image_size`; other formats (PNG, GIF, BMP) are
    decoded whole, then cropped. `stored` (what the dataset's settings promise of its images)
    leaves out the branches no record takes: the format test where every record is a JPEG, the
    choice of DCT scale where none is large enough for one.
    """
    settings = settings or Augmentation()
    stored = stored or manifest_io.StoredImages()

    def jpeg():
        window = crop_window(tf.io.extract_jpeg_shape(encoded), crop, settings, seed)
        return decode_window(encoded, window, image_size, usable_ratios(image_size, stored.max_short_side))

    def other():
        image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
        window = crop_window(tf.shape(image), crop, settings, seed)
        return tf.slice(image, tf.stack([window[0], window[1], 0]), tf.stack([window[2], window[3], 3]))

    image = jpeg() if stored.all_jpeg else tf.cond(tf.io.is_jpeg(encoded), jpeg, other)
    image.set_shape([None, None, 3])
    image = resized(image, image_size, may_fit=crop == "center")
    if flip:
        image = tf.image.random_flip_left_right(image, seed=seed)
    return tf.ensure_shape(image, [image_size, image_size, 3])


def image_dataset(
    data: str,
    manifest: Manifest,
    split: str,
    batch_size: int,
    *,
    image_size: int = 224,
    training: bool,
    input_context=None,
    shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
    seed: int | None = None,
    repeat: bool | None = None,
    augment: bool | None = None,
    augmentation: Augmentation | None = None,
    paths: Sequence[str] | None = None,
    padded: bool = False,
) -> tf.data.Dataset:
    """(images uint8 [batch_size, image_size, image_size, 3], labels int32 [batch_size]).

    `batch_size` is this pipeline's (per replica). Training data repeats forever (the loop counts
    steps from the manifest); evaluation data is one deterministic pass unless `repeat`, in full
    batches, or with `padded` every record, in evaluation_steps' batches with weights (padded_batches).
    `augment` (default: `training`) picks `augmentation`'s training crop and flip, else its
    evaluation crop.
    """
    encoded_key, label_key = manifest_io.image_feature_keys(manifest)
    _, _, replicas = _num_pipelines(input_context)
    if not padded:
        check_batch_size(manifest, split, batch_size * replicas)
    augment = training if augment is None else augment
    settings = augmentation or Augmentation()
    crop = settings.train_crop if augment else settings.eval_crop
    flip = augment and settings.flip
    spec = {encoded_key: tf.io.FixedLenFeature([], tf.string), label_key: tf.io.FixedLenFeature([], tf.int64)}
    if padded and training:
        raise ValueError("padded batches are for evaluation (training=False)")
    records = record_dataset(
        paths or manifest_io.shard_paths(data, manifest, split),
        training=training,
        input_context=input_context,
        seed=seed,
        repeat=False if padded else repeat,
        shuffle_buffer=min(shuffle_buffer, manifest.splits[split].records),
        lengths=() if paths else manifest.splits[split].shard_lengths,
        compression_type=manifest.tf_compression_type,
    )

    label_offset = manifest.label_offset  # stored labels are class ids + offset (1 for ImageNet-style data)

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        return parsed[encoded_key], tf.cast(parsed[label_key] - label_offset, tf.int32)

    stored = manifest_io.stored_images(manifest)

    def decode(encoded, label):
        image = preprocess_image(encoded, image_size, crop=crop, flip=flip, settings=settings, seed=seed, stored=stored)
        return image, label

    # Batched parsing (one parse_example per PARSE_BATCH records), then decoding one image per
    # parallel map call, then the real batch: decoding is the CPU-heavy part and spreads over
    # every core this way.
    images = (
        records.batch(PARSE_BATCH)
        .map(parse, num_parallel_calls=AUTOTUNE, deterministic=not training)
        .unbatch()
        .map(decode, num_parallel_calls=AUTOTUNE, deterministic=not training)
    )
    return _finish(_batched(images, manifest, split, batch_size, input_context, padded), training)


def _batched(elements: tf.data.Dataset, manifest: Manifest, split: str, batch_size: int, input_context, padded: bool):
    """Full batches (drop_remainder: static shapes), or with `padded` every element in the padded
    batches of one evaluation."""
    if not padded:
        return elements.batch(batch_size, drop_remainder=True)
    num_pipelines, _, replicas = _num_pipelines(input_context)
    steps = evaluation_steps(manifest, split, batch_size, input_context)
    return padded_batches(elements, batch_size, steps * max(1, replicas // num_pipelines))


# --------------------------------------------------------------------------------------------
# Tabular


def tabular_parse_spec(manifest: Manifest, columns: Sequence[str]) -> dict:
    """parse_example spec for `columns` from the manifest's feature spec: FixedLenFeature of the
    declared dtype; columns some records lack (required=False) get a default (0, 0.0, "")."""
    return parse_spec([manifest_io.feature(manifest, name) for name in columns], tf, fill_missing=True)


def tabular_columns(manifest: Manifest, label: str, features: Sequence[str] | None = None) -> list[str]:
    """The input columns: `features` if given, else every feature but the label (checked)."""
    label_spec = manifest_io.feature(manifest, label, "label column (--label)")
    if not label_spec.required:
        raise TrainerError(
            f"label column {label!r} is missing from some records (required=false in the manifest); "
            f"training needs a label on every record"
        )
    if label_spec.dtype == "string":
        raise LabelError.strings(label)
    columns = list(features) if features else [name for name in manifest.features if name != label]
    for name in columns:
        manifest_io.feature(manifest, name, "feature column")
    if label in columns:
        raise MissingFeatureError(f"label column {label!r} is also listed as an input feature")
    if not columns:
        raise MissingFeatureError(f"the dataset has no feature besides the label {label!r}")
    return columns


def tabular_dataset(
    data: str,
    manifest: Manifest,
    split: str,
    batch_size: int,
    *,
    label: str,
    training: bool,
    features: Sequence[str] | None = None,
    string_buckets: int | None = None,
    num_classes: int | None = None,
    input_context=None,
    shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER,
    seed: int | None = None,
    repeat: bool | None = None,
    padded: bool = False,
) -> tf.data.Dataset:
    """({column: [batch_size] tensor}, label [batch_size]): int64 labels become int32 class ids,
    float32 labels stay float32 (regression). Columns keep their declared dtype, except that with
    `string_buckets` string columns become int64 hash buckets (so no string reaches an accelerator).
    With `num_classes`, every label is checked to be a class id 0..num_classes-1 as it is read: one
    outside fails with an InvalidArgumentError naming it (LabelError.from_op_error), where the loss
    would fail on CPU with no word of the column, and give NaN or nonsense on a GPU or TPU.
    `padded`: one pass in the weighted, padded batches of an evaluation (as image_dataset)."""
    columns = tabular_columns(manifest, label, features)
    _, _, replicas = _num_pipelines(input_context)
    if padded and training:
        raise ValueError("padded batches are for evaluation (training=False)")
    if not padded:
        check_batch_size(manifest, split, batch_size * replicas)
    spec = tabular_parse_spec(manifest, [*columns, label])
    records = record_dataset(
        manifest_io.shard_paths(data, manifest, split),
        training=training,
        input_context=input_context,
        seed=seed,
        repeat=False if padded else repeat,
        shuffle_buffer=min(shuffle_buffer, manifest.splits[split].records),
        lengths=manifest.splits[split].shard_lengths,
        compression_type=manifest.tf_compression_type,
    )

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        target = parsed.pop(label)
        if num_classes is not None:
            target = checked_labels(target, num_classes, split)
        if target.dtype == tf.int64:
            target = tf.cast(target, tf.int32)
        if string_buckets:
            parsed = {
                name: tf.strings.to_hash_bucket_fast(value, string_buckets) if value.dtype == tf.string else value
                for name, value in parsed.items()
            }
        return parsed, target

    if padded:
        rows = records.batch(batch_size).map(parse, num_parallel_calls=AUTOTUNE, deterministic=True).unbatch()
        return _finish(_batched(rows, manifest, split, batch_size, input_context, padded), training)
    dataset = records.batch(batch_size, drop_remainder=True).map(
        parse, num_parallel_calls=AUTOTUNE, deterministic=not training
    )
    return _finish(dataset, training)


def checked_labels(labels: tf.Tensor, num_classes: int, split: str) -> tf.Tensor:
    """`labels` (int64 [B]), checked to be class ids 0..num_classes-1: else an InvalidArgumentError
    whose message names the largest (or, none too large, the smallest) outside and the split."""
    low, high = tf.reduce_min(labels), tf.reduce_max(labels)
    ok = tf.logical_and(low >= 0, high < num_classes)
    value = tf.where(high >= num_classes, high, low)
    message = tf.strings.join([LabelError.MARK, "holds ", tf.strings.as_string(value), f" in split {split}"])
    with tf.control_dependencies([tf.debugging.Assert(ok, [message])]):
        return tf.identity(labels)


# --------------------------------------------------------------------------------------------
# For tf.distribute


def dataset_fn(make: Callable[..., tf.data.Dataset], global_batch_size: int, **kwargs):
    """A function for `strategy.distribute_datasets_from_function`: one input pipeline per host,
    each with the per-replica batch size and its share of the files. The input contexts it was
    called with are kept in its `contexts` (the strategy calls it as it distributes): how many
    pipelines share the data decides the steps of a padded evaluation (evaluation_steps)."""
    contexts: list[tf.distribute.InputContext] = []

    def fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        contexts.append(input_context)
        return make(
            batch_size=input_context.get_per_replica_batch_size(global_batch_size),
            input_context=input_context,
            **kwargs,
        )

    fn.contexts = contexts
    return fn
