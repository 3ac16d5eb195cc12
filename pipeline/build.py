"""Assembling the transforms into the conversion job."""

from __future__ import annotations

import dataclasses

import apache_beam as beam
from apache_beam.options.pipeline_options import StandardOptions

from core import storage
from pipeline.config import Config, to_dict
from pipeline.job_lease import released, started
from pipeline.planning import Plan
from pipeline.publish import Publication, PublishManifest, RunSettings
from pipeline.readback import ReadBackShards
from pipeline.runners import (
    image_processes,
    reads_local_files,
    shard_check_processes,
    spreads_work,
    writes_while_reading,
)
from transforms.counting import CountRecords, GroupSameContent, SummarizeOutcomes, summarize
from transforms.image_convert import ImageSettings
from transforms.images import ReadImages, ReadImagesIntoShards
from transforms.once import OnceWithAll
from transforms.outcomes import DEAD_LETTERS, SKIPPED
from transforms.permute import PermuteOrder
from transforms.same_content import CONTENT
from transforms.shard_parts import SHARD_PARTS, FinalizeShards, ShardLayout
from transforms.sources import ListClassFolders, ReadImageCsv, Roots
from transforms.tabular import EncodeRows, InferSchema, ListCsvFiles, ReadCsvRows
from transforms.tabular_spill import convert_through_spill
from transforms.write import WriteCopies, WriteDeadLetters, WriteSplits


@dataclasses.dataclass(frozen=True)
class Outcomes:
    """The PCollections one kind of input turns into: every source ends as a record (counted in
    `counted`, written in `shard_files`), a skip or a dead letter."""

    counted: beam.PCollection  # OutcomeSummary of the records, one per bundle
    shard_files: beam.PCollection  # the paths of the written shards
    skipped: beam.PCollection
    dead_letters: list[beam.PCollection]
    schema: beam.PCollection | None = None  # tabular: the inferred column types (one element)
    same_content: beam.PCollection | None = None  # images: SameContent groups (transforms.same_content)


def _written(records, plan: Plan, folder: str) -> tuple[beam.PCollection, beam.PCollection]:
    """Records -> (their OutcomeSummaries, the paths of the shards WriteSplits wrote them to)."""
    written = records | "WriteSplits" >> WriteSplits(folder, plan.shards, plan.compression, plan.file_format)
    counted = records | "CountRecords" >> beam.ParDo(CountRecords())
    return counted, written


def converting_processes(runner: str, config: Config) -> int:
    """How many processes convert the images of a job of `config` on `runner`
    (transforms.convert_pool); 0 for a CSV job, or where images are converted on ReadImages'
    threads."""
    return 0 if config.kind == "csv" else image_processes(runner, config.image.local_processes)


def _image_records(p, start, plan: Plan, config: Config, folder: str) -> Outcomes:
    fractions = config.split_fractions
    if plan.kind == "images":
        listed = start | "ListClassFolders" >> ListClassFolders(
            plan.input,
            config.image.extensions,
            fractions,
            plan.listed_here,
            plan.listing.sources,
            config.listing_threads,
            plan.folder_layout,
        )
    else:
        c = config.image_csv
        roots = Roots(c.roots, local_files=reads_local_files(p.options))
        listed = start | "ReadImageCsv" >> ReadImageCsv(
            plan.input,
            c.uri_column,
            c.label_column,
            c.split_column,
            fractions,
            tuple(plan.shards),
            roots,
            plan.csv_parts,
            plan.csv_size,
            plan.listing.sources,
        )
    settings = ImageSettings(
        plan.label_map,
        config.image_keys,
        config.image.max_pixels,
        config.image.label_offset,
        config.image.encoding,
        max_file_bytes=config.image.max_file_mib << 20,
    )
    reading = dict(
        threads=config.image.read_threads,
        processes=converting_processes(p.options.view_as(StandardOptions).runner, config),
        total=plan.images,
    )
    layout = ShardLayout(folder, plan.shards, plan.compression, plan.file_format)
    into_shards = writes_while_reading(p.options, plan.kind, plan.shards, config.image.local_write_while_reading)
    # Permute the (small) source references, which the listing gives in lists, before anything
    # heavy is read: the records are then born in random order, so every shard is a random mix of
    # the listing. They come out in batches of `read_batch`, and batches, not single sources, are
    # spread over the workers: fewer elements to shuffle, and less of the runner's per-element work
    # on a local run's one bundle thread.
    batches = listed.sources | "PermuteSources" >> PermuteOrder(
        plan.permute_buckets, batch_size=config.image.read_batch, lists=True
    )
    if spreads_work(p.options):
        batches = batches | "SpreadReads" >> beam.Reshuffle()
    read = batches | "ReadImages" >> beam.ParDo(
        ReadImagesIntoShards(layout, settings, **reading) if into_shards else ReadImages(settings, **reading)
    ).with_outputs(DEAD_LETTERS, SHARD_PARTS, CONTENT, main="outputs")
    if into_shards:
        counted, shard_files = read.outputs, read[SHARD_PARTS] | "FinalizeShards" >> FinalizeShards(layout)
    else:
        counted, shard_files = _written(read.outputs, plan, folder)
    same_content = read[CONTENT] | "GroupSameContent" >> GroupSameContent(spreads_work(p.options))
    dead_letters = [listed.dead_letters, read.dead_letters]
    return Outcomes(counted, shard_files, listed.skipped, dead_letters, same_content=same_content)


def _tabular_records(p, start, plan: Plan, config: Config, folder: str) -> Outcomes:
    """Every row read, its schema inferred over all of them, each encoded with it and written.
    Where the runner holds a step's whole output (the lean runner: writes_while_reading), the rows
    wait for the schema on disk (transforms.tabular_spill). Elsewhere the schema is a side input:
    Dataflow keeps the rows that wait for it in its shuffle (PermuteRows groups them anyway), so
    spilling them too would only add a write and a read; the parallel runner holds every record
    whatever the graph."""
    files = start | "ListCsvFiles" >> beam.ParDo(ListCsvFiles(plan.input)).with_outputs(
        SKIPPED, DEAD_LETTERS, main="files"
    )
    root = storage.pattern_root(plan.input)
    infer = InferSchema(plan.columns, config.csv.schema, plan.dialect.decimal, plan.label_column, known=plan.label_map)
    if writes_while_reading(p.options, plan.kind, plan.shards, config.image.local_write_while_reading):
        spilled = convert_through_spill(
            files.files,
            root,
            plan.columns,
            config.split_fractions,
            plan.dialect,
            infer,
            ShardLayout(folder, plan.shards, plan.compression, plan.file_format),
            plan.listing.bytes,
            plan.label_column,
        )
        dead_letters = [files.dead_letters, *spilled.dead_letters]
        return Outcomes(spilled.counted, spilled.shard_files, files.skipped, dead_letters, spilled.schema)
    rows = (
        files.files
        | "SpreadFiles" >> beam.Reshuffle()
        | "ReadCsvRows"
        >> beam.ParDo(
            ReadCsvRows(
                root,
                plan.columns,
                config.split_fractions,
                plan.dialect.delimiter,
                plan.listing.bytes,
                plan.dialect.header,
            )
        ).with_outputs(DEAD_LETTERS, main="rows")
    )
    schema = rows.rows | "InferSchema" >> beam.CombineGlobally(infer)
    encoded = (
        rows.rows
        | "PermuteRows" >> PermuteOrder(plan.permute_buckets)
        | "EncodeRows"
        >> beam.ParDo(
            EncodeRows(plan.columns, plan.dialect.decimal, plan.label_column), beam.pvalue.AsSingleton(schema)
        ).with_outputs(DEAD_LETTERS, main="records")
    )
    counted, shard_files = _written(encoded.records, plan, folder)
    dead_letters = [files.dead_letters, rows.dead_letters, encoded.dead_letters]
    return Outcomes(counted, shard_files, files.skipped, dead_letters, schema)


def _summarize(options) -> beam.PTransform:
    """Every outcome -> one OutcomeSummary: a combine where workers can combine in parallel; on the
    lean runner, which has one, a single call (OnceWithAll: fewer steps for Beam to inspect)."""
    return beam.CombineGlobally(SummarizeOutcomes()) if spreads_work(options) else OnceWithAll(summarize)


def build_pipeline(p: beam.Pipeline, plan: Plan, config: Config, publication: Publication) -> None:
    """List -> permute -> read/parse -> Examples -> per-split TFRecords and dead letters in
    `publication.folder` -> every shard read back -> the manifest, published by `publication` (a
    dataset folder, or a refresh's new version). Every step that writes follows the job's start
    element, given once the job holds its output's lease when it takes one (pipeline.job_lease)."""
    build_records = _tabular_records if plan.kind == "csv" else _image_records
    outcomes = build_records(p, started(p, publication.job_lease), plan, config, publication.folder)
    dead_letters = outcomes.dead_letters | "AllDeadLetters" >> beam.Flatten()
    error_files = dead_letters | "WriteDeadLetters" >> WriteDeadLetters(publication.folder)
    groups = () if outcomes.same_content is None else (outcomes.same_content,)
    summary = (
        (outcomes.counted, outcomes.skipped, dead_letters, *groups)
        | "AllOutcomes" >> beam.Flatten()
        | "Summarize" >> _summarize(p.options)
    )
    read_back = p | "ReadBack" >> ReadBackShards(
        publication.folder,
        plan,
        outcomes.shard_files,
        spread=spreads_work(p.options),
        processes=shard_check_processes(p.options, publication.folder),
    )
    schema_side = beam.pvalue.AsSingleton(outcomes.schema) if outcomes.schema is not None else None
    copies_side = ()  # a tabular run finds no copies
    if outcomes.same_content is not None:
        copies_side = beam.pvalue.AsList(outcomes.same_content | "WriteCopies" >> WriteCopies(publication.folder))
    settings = RunSettings(
        publication.run, to_dict(config), config.image_keys, config.max_error_fraction, config.image.label_offset
    )
    published = (
        p
        | "PublishTrigger" >> beam.Impulse()
        | "PublishManifest"
        >> beam.ParDo(
            PublishManifest(plan, settings, publication),
            beam.pvalue.AsSingleton(summary),
            beam.pvalue.AsList(read_back),
            beam.pvalue.AsList(outcomes.shard_files),
            beam.pvalue.AsList(error_files),
            schema_side,
            copies_side,
        )
    )
    if publication.job_lease is not None:
        released(published, publication.job_lease)
