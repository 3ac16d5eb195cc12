"""Command line: `python -m pipeline [--input SRC] [--output DEST] [--kind K] [--config FILE] ...`
and `python -m pipeline inspect DEST [--verify] [--contact_sheet FILE.png]`
and `python -m pipeline refresh --input SRC --output ROOT [...] [--keep K]` (see pipeline.refresh).

Our flags are parsed here; every other flag (`--runner`, `--project`, `--temp_location`,
`--direct_num_workers`, ...) goes to Beam's PipelineOptions (pipeline.runners: which runner a
local run gets).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions, StandardOptions, TestOptions

from pipeline.build import build_pipeline
from pipeline.config import KINDS, Config, ConfigError, load_config
from pipeline.manifest import Manifest
from pipeline.output import OutputExistsError, prepare_output, read_manifest
from pipeline.planning import Plan, PlanError, make_plan
from pipeline.publish import problems
from pipeline.runners import HideInMemoryWorkersWarning, limit_malloc_arenas, make_pipeline, pipeline_options

_LOG = logging.getLogger("pipeline")


def _splits(text: str) -> dict[str, float]:
    """'train=0.8,validation=0.2' -> {'train': 0.8, 'validation': 0.2}"""
    try:
        return {name.strip(): float(value) for name, value in (part.split("=") for part in text.split(","))}
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected name=fraction,... got {text!r}") from e


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__.split("\n\n")[0],
                                epilog="Unrecognised flags are passed to Apache Beam (e.g. --runner DataflowRunner).")
    p.add_argument("--input", help="folder of class folders, image CSV, or CSV file pattern (local or gs://); "
                                   "default: the bundled sample")
    p.add_argument("--output", help="dataset folder (local or gs://); default: output/sample[_KIND]")
    p.add_argument("--kind", choices=KINDS, help="images (class folders, the default), image_csv, or csv (tabular)")
    p.add_argument("--config", help="YAML file of settings (see configs/); flags override it")
    p.add_argument("--splits", type=_splits, help="split fractions, e.g. train=0.8,validation=0.2")
    p.add_argument("--num_shards", type=int, help="shards per split (overrides the computed count)")
    p.add_argument("--reader_hosts", type=int, help="hosts that will read the data (>= shards_per_host shards each)")
    p.add_argument("--target_shard_mib", type=float, help="target shard size in MiB (default 128)")
    p.add_argument("--max_error_fraction", type=float,
                   help="fail the run (exit 1, after writing the report) above this fraction of bad sources (default 0.01)")
    p.add_argument("--overwrite", action="store_true", default=None, help="replace a dataset already in --output")
    return p


def overrides(args: argparse.Namespace) -> dict:
    """The flags that were given, shaped like the YAML config."""
    flat = {k: v for k, v in vars(args).items() if v is not None and k != "config"}
    sharding = {k: flat.pop(k) for k in ("num_shards", "reader_hosts", "target_shard_mib") if k in flat}
    return {**flat, **({"sharding": sharding} if sharding else {})}


def summary_text(manifest: Manifest, output: str, seconds: float) -> str:
    c = manifest.counts
    lines = [f"Dataset written to {output}"]
    for split in manifest.splits.values():
        lines.append(f"  {split.name:<12} {split.records:>9} records  {len(split.shards):>5} shard(s)  {split.bytes / 1e6:9.1f} MB")
    lines.append(f"  listed {c.listed}, written {c.written} (converted {c.converted}), skipped {c.skipped}, errors {c.errors}")
    if c.errors:
        by_stage = ", ".join(f"{stage} {n}" for stage, n in manifest.errors_by_stage.items())
        lines.append(f"  errors by stage: {by_stage}; details in {', '.join(manifest.error_files)}")
    rate = (c.listed - c.skipped) / seconds if seconds else 0.0
    lines.append(f"  elapsed {seconds:.1f} s, {rate:.0f} sources/s")
    return "\n".join(lines)


def stages_only(options: PipelineOptions) -> bool:
    """True when `run()` only builds or stages the job (--dry_run, --template_location: a classic
    template, or a Flex Template launch, whose launcher does not wait for the job) on Dataflow."""
    if "Dataflow" not in str(options.view_as(StandardOptions).runner):
        return False  # local runners ignore both options and run the job
    return bool(options.view_as(GoogleCloudOptions).template_location or options.view_as(TestOptions).dry_run)


def run_job(plan: Plan, config: Config, beam_args: list[str], latest=None) -> Manifest | None:
    """Runs the conversion job to completion and returns the manifest it wrote; None when the job
    was only built or staged (see stages_only). `latest`: see publish.PublishManifest."""
    options = pipeline_options(beam_args, plan.listing["bytes"])
    p = make_pipeline(options)
    build_pipeline(p, plan, config, latest)
    p.run().wait_until_finish()
    return None if stages_only(options) else read_manifest(plan.output)


def convert(argv: list[str]) -> int:
    args, beam_args = parser().parse_known_args(argv)
    try:
        config = load_config(args.config, overrides(args))
        plan = make_plan(config)
        prepare_output(plan.output, config.overwrite)
    except (ConfigError, PlanError, OutputExistsError) as e:
        _LOG.error("%s", e)
        return 2
    _LOG.info("converting %d listed file(s) from %s into %s", plan.listing["files"], plan.input, plan.output)
    started = time.monotonic()
    manifest = run_job(plan, config, beam_args)
    if manifest is None:
        print(f"Job built/staged, not run (--dry_run or --template_location); it will write {plan.output}")
        return 0
    print(summary_text(manifest, plan.output, time.monotonic() - started))
    found = problems(plan, manifest)
    for problem in found:
        _LOG.error("%s", problem)
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    limit_malloc_arenas()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    logging.getLogger(HideInMemoryWorkersWarning.LOGGER).addFilter(HideInMemoryWorkersWarning())
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "inspect":
        from pipeline.inspect import main as inspect_main  # pylint: disable=import-outside-toplevel  # imports TensorFlow

        return inspect_main(argv[1:])
    if argv and argv[0] == "refresh":
        from pipeline.refresh import main as refresh_main  # pylint: disable=import-outside-toplevel

        return refresh_main(argv[1:])
    return convert(argv)
