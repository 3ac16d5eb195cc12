"""Images per second delivered by the trainer's input pipeline, side by side with the seeds' reader.

    python scripts/make_photo_corpus.py                     # ~2,000 photos in bench/photos
    python -m pipeline --input bench/photos --output bench/photos_tfrecords --overwrite
    python scripts/benchmark_input.py [--data bench/photos_tfrecords] [--runs 3] [--batch_size 64]
                                      [--docs docs/performance.md]

    # the trainer on records stored at training size, the seeds' reader on the full-size records
    python scripts/bench_resize.py --corpus bench/photos --keep bench/resize     # converts both ways
    python scripts/benchmark_input.py --data bench/resize/photos-resized --seeds_data bench/resize/photos-full

Both readers read the same GZIP shards (every split: the whole corpus) on the CPU and deliver
batches of 224x224x3 images with their labels (the trainer's as uint8, which its models take; the
seeds' as float32); nothing consumes them but the timer.

* trainer, training: `trainer.input_fn.image_dataset` in training mode, as the job runs it: shard
  files shuffled, parallel non-deterministic interleave of TFRecordDatasets, record shuffle buffer,
  batched parse_example, parallel random-crop decode (only the sampled window of a JPEG, DCT-scaled
  when the window is at least twice the target size) + resize + flip, batch(drop_remainder=True),
  prefetch.
* trainer, evaluation: the same in evaluation mode: deterministic order, no shuffling, the central
  crop decoded (DCT-scaled likewise) + resize; one pass, built cold, as each evaluation builds it.
* seeds: the seeds' reader, `TFRecordDataset(files)` -> map(parse_single_example) -> decode ->
  cache() -> shuffle -> resize -> batch, no interleave. Its maps get num_parallel_calls=AUTOTUNE
  (the strongest reading of it); the literal form (plain maps) is timed too. Its cache() holds the
  decoded full-size images in memory, so only its first epoch decodes; that epoch is the
  comparison (a job of real size cannot cache decoded images), the cached second epoch is shown
  for completeness.

One run = a freshly built pipeline of each reader delivering two epochs (records // batch_size
batches each; a new iterator per epoch for the seeds' reader, as Keras' fit makes, the trainer's
repeats; one pass for evaluation), each epoch timed on its own, wall clock and this process's CPU
time. The trainer's first epoch includes building and starting its pipeline (tracing, filling the
shuffle buffer, thread pools ramping up), as the seeds' first epoch does; its second epoch is the
steady state a training job runs in. The seeds' second epoch comes from its cache (resize only).
Runs alternate between the readers (spreading the noise of other processes); each reader is warmed
up first; medians of --runs are reported, with a read + parse only row as the ceiling without
decoding, and two decode floors (the random and the center window of each JPEG decoded at the
coarsest DCT scale, no resize): less work than any reader that shows the model that window, so
their speed-up over the seeds' reader bounds what decoding less can reach on this corpus and CPU.
`--docs PATH` also writes the table of medians into that markdown page's block `training-input`,
with this command and the machine (bench_docs).

`--seeds_data DIR` gives the seeds' reader (both its forms) a dataset of its own, the same photos
converted at full size, while the trainer's readers, the read + parse row and the decode floors
read `--data`, those photos stored at training size (config `image.resize`): what storing them so
gains against the seeds' reader on the full-size records (goal: at least 4x, training and
evaluation). A row then times the trainer's decode alone in its steady state (the random window
at full scale, the scale it decodes such images at, no resize), and what its resize, rounding and
flip cost is the rest of the trainer's steady-state CPU. The table goes into the block
`training-input-resized-RECORDS`, with the speed-ups below it.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import sys
import time

import tensorflow as tf
from bench_docs import check_blocks, invoked_command, markdown_table, write_tables

REPO = pathlib.Path(__file__).resolve().parents[1]

AUTOTUNE = tf.data.AUTOTUNE
DOCS_BLOCK = "training-input"
GOAL = 2.0  # the trainer's speed-up over the seeds' reader on the same records, at least
GOAL_RESIZED = 4.0  # the same on records stored at training size, the seeds' reader's at full size


def seeds_reader(
    paths, manifest, batch_size: int, image_size: int, shuffle_buffer: int, parallel: bool = True
) -> tf.data.Dataset:
    """The seeds' reader; `parallel=False` writes its maps literally (no num_parallel_calls; tf.data
    may still parallelise them, its map_parallelization optimisation being on by default)."""
    keys = manifest.image_keys
    spec = {keys["encoded"]: tf.io.FixedLenFeature([], tf.string), keys["label"]: tf.io.FixedLenFeature([], tf.int64)}
    calls = AUTOTUNE if parallel else None

    def parse(record):
        example = tf.io.parse_single_example(record, spec)
        return example[keys["encoded"]], tf.cast(example[keys["label"]], tf.int32)

    def decode(encoded, label):
        return tf.io.decode_image(encoded, channels=3, expand_animations=False), label

    def resize(image, label):
        return tf.image.resize(image, [image_size, image_size]), label

    return (
        tf.data.TFRecordDataset(paths, compression_type="GZIP")
        .map(parse, num_parallel_calls=calls)
        .map(decode, num_parallel_calls=calls)
        .cache()
        .shuffle(shuffle_buffer)
        .map(resize, num_parallel_calls=calls)
        .batch(batch_size)
    )


def trainer_reader(data, manifest, paths, batch_size: int, image_size: int, training: bool = True) -> tf.data.Dataset:
    from trainer import input_fn  # the repository is on sys.path from main() on

    split = max(manifest.splits, key=lambda s: manifest.splits[s].records)  # for the batch-size check only
    return input_fn.image_dataset(
        data, manifest, split, batch_size, image_size=image_size, training=training, paths=paths
    )


def decode_floor(manifest, paths, batch_size: int, crop: str, ratio: int = 8) -> tf.data.Dataset:
    """Read + parse as the trainer does, then the `crop` window of each JPEG decoded at DCT `ratio`,
    no resize. At ratio 8, the coarsest, it is less work than any reader that decodes the window the
    model sees (nearly all of it entropy decoding, which no scale or crop skips for the rows above
    the window's bottom): its img/s bounds what decoding less can gain on this corpus and CPU. At
    ratio 1 it is the trainer's own decode of images stored at training size, without what follows
    it (resize, rounding, flip)."""
    from trainer import input_fn  # the repository is on sys.path from main() on

    keys = manifest.image_keys
    settings = input_fn.Augmentation()

    def decode(encoded):
        window = input_fn.crop_window(tf.io.extract_jpeg_shape(encoded), crop, settings, seed=None)
        return tf.reduce_max(tf.io.decode_and_crop_jpeg(encoded, window // ratio, channels=3, ratio=ratio))

    return (
        input_fn.record_dataset(paths, training=True)
        .batch(input_fn.PARSE_BATCH)
        .map(lambda r: tf.io.parse_example(r, {keys["encoded"]: tf.io.FixedLenFeature([], tf.string)})[keys["encoded"]])
        .unbatch()
        .map(decode, num_parallel_calls=AUTOTUNE, deterministic=False)
        .batch(batch_size, drop_remainder=True)
        .prefetch(AUTOTUNE)
    )


def parse_only(manifest, paths, batch_size: int) -> tf.data.Dataset:
    from trainer import input_fn  # the repository is on sys.path from main() on

    keys = manifest.image_keys
    spec = {keys["encoded"]: tf.io.FixedLenFeature([], tf.string), keys["label"]: tf.io.FixedLenFeature([], tf.int64)}
    return (
        input_fn.record_dataset(paths, training=True)
        .batch(batch_size, drop_remainder=True)
        .map(lambda r: tf.io.parse_example(r, spec), num_parallel_calls=AUTOTUNE)
        .prefetch(AUTOTUNE)
    )


def timed_epoch(
    make, batches: int, batch_size: int, epochs: int = 1, new_iterator_per_epoch: bool = True
) -> list[tuple[float, float]]:
    """(images/s, CPU ms per image) of each of `epochs` passes of `batches` full batches over one
    freshly built pipeline: a new iterator per epoch (what Keras' fit does with a finite dataset)
    or one iterator throughout (a repeated dataset, as the trainer's loop reads it). The CPU time
    is this process's (every thread), so it is little affected by other processes."""
    started, cpu_started = time.perf_counter(), time.process_time()
    dataset = make()
    figures = []
    iterator = None
    for _ in range(epochs):
        if new_iterator_per_epoch or iterator is None:
            iterator = iter(dataset)
        for _ in range(batches):
            element = next(iterator)
            assert tf.nest.flatten(element)[0].shape[0] == batch_size  # a full batch, whatever its structure
        now, cpu_now = time.perf_counter(), time.process_time()
        figures.append(
            (batches * batch_size / (now - started), 1000 * (cpu_now - cpu_started) / (batches * batch_size))
        )
        started, cpu_started = now, cpu_now
    return figures


def medians_table(runs: dict, medians: dict, records: int, shards: str, batch_size: int, image_size: int) -> str:
    """The readers' medians as a markdown table, with the spread of their runs; `shards`: what the
    readers read, in words."""
    rows = []
    for name, figures in runs.items():
        rates = [r for r, _ in figures]
        rows.append([name, f"{medians[name][0]:,.0f} ({min(rates):,.0f}-{max(rates):,.0f})", f"{medians[name][1]:.2f}"])
    heading = f"reader ({records:,} records in {shards}, batches of {batch_size}, {image_size} px)"
    runs_each = min(len(figures) for figures in runs.values())
    return markdown_table([heading, f"img/s, median of {runs_each} (min-max)", "CPU ms/img"], rows)


def _dataset(manifest_io, data: str):
    """A converted dataset's manifest, its shards (every split) and their megabytes."""
    manifest = manifest_io.load_manifest(data)
    paths = [path for split in manifest.splits for path in manifest_io.shard_paths(data, manifest, split)]
    return manifest, paths, sum(split.bytes for split in manifest.splits.values()) / 1e6


def _verdict(speedup: dict, goal: float) -> str:
    """The trainer's speed-ups over the seeds' reader's 1st epoch against `goal`: training in its
    steady state (what a job runs at for all its epochs but the first) and evaluation (a cold
    pass, as each evaluation is); training's 1st epoch, which also builds and warms the pipeline
    once per job, is given beside them."""
    under = [name for name, key in (("training", "steady"), ("evaluation", "evaluation")) if speedup[key] < goal]
    return (
        f"Speed-up of the trainer's reader over the seeds' reader's 1st epoch, medians: training "
        f"{speedup['steady']:.2f}x in its steady state ({speedup['cold']:.2f}x in its 1st epoch, which "
        f"builds and warms the pipeline once per job), evaluation {speedup['evaluation']:.2f}x; "
        + (f"under the goal of {goal:g}x: {', '.join(under)}." if under else f"both at least the goal of {goal:g}x.")
    )


def _after_decode(bound: dict) -> str:
    """What the trainer's decode of the window leaves for the rest of its work, in training."""
    return (
        f"The trainer's decode alone (the random window at full scale, no resize), in its steady state, "
        f"reaches {bound['training_decode_alone']:.2f}x; the trainer's resize, rounding and flip take the "
        f"other {bound['after_decode_cpu_ms']:.2f} ms of CPU per image in its own."
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="bench/photos_tfrecords", help="converted benchmark corpus")
    p.add_argument(
        "--seeds_data", help="the seeds' reader's own dataset: the same photos at full size (default: --data)"
    )
    p.add_argument("--runs", type=int, default=3, help="timed runs per reader (median reported; >= 3)")
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--image_size", type=int, default=224)
    p.add_argument("--seeds_shuffle_buffer", type=int, default=1000, help="the seeds' shuffle buffer (decoded images)")
    p.add_argument("--json", help="also write the figures here")
    p.add_argument("--docs", help=f"also write the table into this markdown page's block {DOCS_BLOCK}")
    args = p.parse_args(argv)
    if args.runs < 3:
        p.error("--runs must be at least 3")

    tf.config.set_visible_devices([], "GPU")  # CPU only, for both readers
    sys.path.insert(0, str(REPO))
    from trainer import manifest_io

    manifest, paths, size_mb = _dataset(manifest_io, args.data)
    seeds_manifest, seeds_paths, seeds_mb = manifest, paths, size_mb
    if args.seeds_data:
        seeds_manifest, seeds_paths, seeds_mb = _dataset(manifest_io, args.seeds_data)
        if seeds_manifest.records != manifest.records:
            p.error(
                f"--seeds_data holds {seeds_manifest.records} records, --data {manifest.records}: not the same photos"
            )
    records = manifest.records
    block = f"{DOCS_BLOCK}-resized-{records}" if args.seeds_data else DOCS_BLOCK
    if args.docs:
        check_blocks(args.docs, [block])
    batches = records // args.batch_size
    bs, size = args.batch_size, args.image_size
    trainer = "trainer input_fn: 1st epoch (cold start)"
    trainer_steady = "trainer input_fn: 2nd epoch (steady state)"
    evaluation = "trainer input_fn, evaluation: 1 pass (cold start)"
    seeds = "seeds' reader, parallel maps: 1st epoch"
    seeds_cached = "seeds' reader, parallel maps: 2nd epoch (its cache)"
    literal = "seeds' reader, literal maps: 1st epoch"
    readers = {  # name -> (pipeline factory, names of the epochs timed in each run)
        trainer: (lambda: trainer_reader(args.data, manifest, paths, bs, size), (trainer, trainer_steady)),
        evaluation: (lambda: trainer_reader(args.data, manifest, paths, bs, size, training=False), (evaluation,)),
        seeds: (
            lambda: seeds_reader(seeds_paths, seeds_manifest, bs, size, args.seeds_shuffle_buffer),
            (seeds, seeds_cached),
        ),
        literal: (
            lambda: seeds_reader(seeds_paths, seeds_manifest, bs, size, args.seeds_shuffle_buffer, parallel=False),
            (literal,),
        ),
    }
    shards = f"{len(paths)} GZIP shards ({size_mb:,.1f} MB)"
    if args.seeds_data:
        shards = (
            f"{shards} stored at training size for the trainer, {len(seeds_paths)} shards ({seeds_mb:,.1f} MB) "
            f"at full size for the seeds' reader"
        )
    print(
        f"corpus {args.data}: {records} records in {shards}; "
        f"{batches} batches of {bs} at {size}x{size} per epoch; CPU: {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), TensorFlow {tf.__version__}",
        flush=True,
    )

    for make, _ in readers.values():  # warm-up: graph building, file cache
        timed_epoch(make, min(5, batches), bs)
    runs: dict[str, list[tuple[float, float]]] = {
        name: [] for name in (trainer, trainer_steady, evaluation, seeds, literal, seeds_cached)
    }
    for run in range(args.runs):
        for make, epochs in readers.values():
            one_iterator = epochs[0] == trainer
            for name, figures in zip(
                epochs, timed_epoch(make, batches, bs, len(epochs), not one_iterator), strict=True
            ):
                runs[name].append(figures)
                print(f"  run {run + 1}: {name:<52} {figures[0]:8.0f} img/s  {figures[1]:6.2f} CPU ms/img", flush=True)
    parse = "trainer: read + parse only (no decode)"
    runs[parse] = [timed_epoch(lambda: parse_only(manifest, paths, bs), batches, bs)[0] for _ in range(args.runs)]
    floors = {crop: f"decode floor: {crop} window at ratio 8, no resize" for crop in ("random", "center")}
    for crop, name in floors.items():
        runs[name] = [
            timed_epoch(lambda crop=crop: decode_floor(manifest, paths, bs, crop), batches, bs)[0]
            for _ in range(args.runs)
        ]
    window = "trainer's decode alone, 2nd epoch: random window at full scale, no resize"
    if args.seeds_data:  # images stored at training size: the trainer decodes them at full scale
        runs[window] = [  # the steady state, as the trainer's that it is set against
            timed_epoch(lambda: decode_floor(manifest, paths, bs, "random", ratio=1), batches, bs, 2, False)[1]
            for _ in range(args.runs)
        ]

    medians = {
        name: (statistics.median(r for r, _ in figures), statistics.median(c for _, c in figures))
        for name, figures in runs.items()
    }
    print()
    print(f"{'reader':<56} {'img/s':>7} {'CPU ms/img':>11}   runs (img/s)")
    for name, figures in runs.items():
        each = ", ".join(f"{r:.0f}" for r, _ in figures)
        print(f"{name:<56} {medians[name][0]:>7.0f} {medians[name][1]:>11.2f}   {each}")
    speedup = {
        "cold": medians[trainer][0] / medians[seeds][0],
        "steady": medians[trainer_steady][0] / medians[seeds][0],
        "evaluation": medians[evaluation][0] / medians[seeds][0],
        "cold_vs_literal": medians[trainer][0] / medians[literal][0],
    }
    bound = {
        "training": medians[floors["random"]][0] / medians[seeds][0],
        "evaluation": medians[floors["center"]][0] / medians[seeds][0],
    }
    if window in medians:
        bound["training_decode_alone"] = medians[window][0] / medians[seeds][0]
        bound["after_decode_cpu_ms"] = medians[trainer_steady][1] - medians[window][1]
    cpu_ratio = {
        "cold": medians[seeds][1] / medians[trainer][1],
        "steady": medians[seeds][1] / medians[trainer_steady][1],
        "evaluation": medians[seeds][1] / medians[evaluation][1],
    }
    goal = GOAL_RESIZED if args.seeds_data else GOAL
    if args.docs:
        command = invoked_command(__file__, sys.argv[1:] if argv is None else argv)
        text = medians_table(runs, medians, records, shards, bs, size)
        if args.seeds_data:
            text += "\n\n" + _verdict(speedup, goal) + " " + _after_decode(bound)
        write_tables(args.docs, {block: text}, command)
    print(
        f"\nspeed-up over the seeds' reader's 1st epoch (both decode + resize every image), medians; "
        f"target >= {goal:g}x:"
        f"\n  trainer, training, 1st epoch, pipeline built cold as the seeds' is: {speedup['cold']:.2f}x img/s, "
        f"{cpu_ratio['cold']:.2f}x less CPU per image "
        f"({speedup['cold_vs_literal']:.2f}x over the literal seeds' reader)"
        f"\n  trainer, evaluation, one pass built cold: {speedup['evaluation']:.2f}x img/s, "
        f"{cpu_ratio['evaluation']:.2f}x less CPU per image"
        f"\n  trainer, training, steady state (what a training job sees after its first epoch): "
        f"{speedup['steady']:.2f}x img/s, "
        f"{cpu_ratio['steady']:.2f}x less CPU per image"
        f"\nbound (the decode floors over the seeds' reader's 1st epoch; no reader that decodes the window "
        f"each image shows can pass it on this CPU): training {bound['training']:.2f}x, "
        f"evaluation {bound['evaluation']:.2f}x"
        + (f"\n{_after_decode(bound)}" if "training_decode_alone" in bound else "")
    )
    if args.json:
        pathlib.Path(args.json).write_text(
            json.dumps(
                {
                    "records": records,
                    "shards": len(paths),
                    "seeds_shards": len(seeds_paths),
                    "megabytes": size_mb,
                    "seeds_megabytes": seeds_mb,
                    "goal": goal,
                    "batch_size": bs,
                    "image_size": size,
                    "cpus": os.cpu_count(),
                    "runs": runs,
                    "medians": medians,
                    "speedup": speedup,
                    "cpu_ratio": cpu_ratio,
                    "bound": bound,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
