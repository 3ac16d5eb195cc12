"""Calling a function once with every element of a PCollection, also when it has none.

Beam's `CombineGlobally(ToList())` followed by a step gives the same, in ten transforms of which
six are ParDos (its default for an empty input is a side input of its own), and Beam inspects
every transform of a graph before the first record (README, Performance). Here: the elements and
one start marker under one key, one GroupByKey, one call. The elements reach the call as an
iterator, so a runner that pages a group's values (Dataflow) never holds them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import apache_beam as beam


class _Start:
    """The marker that makes the group exist when the PCollection is empty."""


def _elements(group) -> Iterator:
    _, values = group
    return (value for value in values if not isinstance(value, _Start))


@beam.ptransform_fn
def OnceWithAll(pcoll, fn: Callable[..., Iterable], *args):
    """fn(iterator over every element of `pcoll`, *args), called once after the last element has
    arrived; outputs what it returns (an iterable)."""
    start = pcoll.pipeline | "Start" >> beam.Impulse() | "Marker" >> beam.Map(lambda _: (None, _Start()))
    return (
        (pcoll | "OneKey" >> beam.Map(lambda element: (None, element)), start)
        | "WithMarker" >> beam.Flatten()
        | "Group" >> beam.GroupByKey()
        | "Call" >> beam.FlatMap(lambda group: fn(_elements(group), *args))
    )
