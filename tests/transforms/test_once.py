"""OnceWithAll on both local runners: one call with every element, and one call when there are none
(the dead-letter file and the shards must exist even then)."""

import apache_beam as beam
import pytest
from apache_beam.testing.util import assert_that, equal_to

from pipeline.runners import LEAN, PARALLEL
from transforms.once import OnceWithAll

RUNNERS = [LEAN, PARALLEL]


def _call(elements, tag):
    elements = list(elements)
    return [(tag, len(elements), sorted(elements, key=repr))]


@pytest.mark.parametrize("runner", RUNNERS)
def test_one_call_gets_every_element(runner):
    values = list(range(50)) + [b"", None]  # whatever an Impulse or a Create gives is passed through
    with beam.Pipeline(runner=runner) as p:
        calls = p | beam.Create(values) | OnceWithAll(_call, "all")
        assert_that(calls, equal_to([("all", 52, sorted(values, key=repr))]))


@pytest.mark.parametrize("runner", RUNNERS)
def test_an_empty_input_still_gets_its_call(runner):
    with beam.Pipeline(runner=runner) as p:
        calls = p | beam.Create([]) | OnceWithAll(_call, "none")
        assert_that(calls, equal_to([("none", 0, [])]))
