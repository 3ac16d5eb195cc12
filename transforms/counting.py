"""Counting outcomes in Beam: the run's counters, and the OutcomeSummary the manifest reports,
reduced from every outcome (transforms.outcomes) of the run and the groups of sources with the
same bytes (transforms.same_content)."""

from __future__ import annotations

from collections.abc import Iterable

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindows

from transforms.once import OnceWithAll
from transforms.outcomes import METRICS_NAMESPACE, OutcomeSummary, Record
from transforms.same_content import groups_in, same_content


def counter(name: str):
    return beam.metrics.Metrics.counter(METRICS_NAMESPACE, name)


class CountRecords(beam.DoFn):
    """Records -> one OutcomeSummary per bundle that held any. One step per record, where a Map to
    small counted tuples, a Flatten and a combine took several; and only summaries, never full
    records, reach the Flatten before the combine (the FnApiRunner materializes what a Flatten
    takes in: full records there doubled its peak memory, README, Performance). An empty bundle
    says nothing: the lean runner runs one when there are no records at all, after the steps
    downstream have closed their input (a GroupByKey there fails on a late element)."""

    def start_bundle(self):
        self._summary, self._counted = OutcomeSummary(), False

    def process(self, record: Record):
        self._summary.add(record)
        self._counted = True

    def finish_bundle(self):
        if self._counted:
            yield GlobalWindows.windowed_value(self._summary)


class GroupSameContent(beam.PTransform):
    """Lists of each record's (digest, Copy) -> a SameContent for each digest more than one source
    holds: grouped by key where workers can group in parallel; on the lean runner, which has one,
    in one call (OnceWithAll: a GroupByKey there costs more per element than the job's own steps)."""

    def __init__(self, spread: bool):
        super().__init__()
        self._spread = spread

    def expand(self, batches):
        if not self._spread:
            return batches | "InOneCall" >> OnceWithAll(groups_in)
        return (
            batches
            | "EachCopy" >> beam.FlatMap(iter)
            | "ByDigest" >> beam.GroupByKey()
            | "SameContent" >> beam.FlatMapTuple(same_content)
        )


class SummarizeOutcomes(beam.CombineFn):
    """Reduces every outcome of the run (and the records' CountRecords summaries) to one
    OutcomeSummary."""

    def create_accumulator(self):
        return OutcomeSummary()

    def add_input(self, acc, outcome):
        if isinstance(outcome, OutcomeSummary):
            acc.merge(outcome)
        else:
            acc.add(outcome)
        return acc

    def merge_accumulators(self, accumulators):
        merged = OutcomeSummary()
        for acc in accumulators:
            merged.merge(acc)
        return merged

    def extract_output(self, acc):
        return acc


def summarize(outcomes: Iterable) -> list[OutcomeSummary]:
    """SummarizeOutcomes over every outcome in one call (transforms.once.OnceWithAll)."""
    fn = SummarizeOutcomes()
    summary = fn.create_accumulator()
    for outcome in outcomes:
        summary = fn.add_input(summary, outcome)
    return [fn.extract_output(summary)]
