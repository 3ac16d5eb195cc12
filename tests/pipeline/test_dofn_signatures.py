"""Beam's DoFn inspection through pipeline.dofn_signatures: the same answers as Beam's own
`get_function_args_defaults`, asked once per function, held weakly, and given to each caller as
lists of its own; and every pipeline the job makes inspects through it, with Beam's state and
timer checks working as before."""

import functools
import gc
import inspect
import weakref

import apache_beam as beam
import pytest
from apache_beam.coders import VarIntCoder
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import core, userstate

from pipeline.dofn_signatures import _ASK_BEAM as beams_own
from pipeline.dofn_signatures import args_and_defaults
from pipeline.runners import make_pipeline, pipeline_options

COUNT = userstate.ReadModifyWriteStateSpec("count", VarIntCoder())


class _Plain(beam.DoFn):
    def process(self, element, timestamp=beam.DoFn.TimestampParam, extra=3):
        yield element

    @classmethod
    def make(cls, name, size=1):
        return cls()


class _Counting(beam.DoFn):
    def process(self, element, count=beam.DoFn.StateParam(COUNT)):
        key, value = element
        total = (count.read() or 0) + value
        count.write(total)
        yield key, total


class _CallableObject:
    def __call__(self, a, b=2):
        return a


def _function(a, b, *rest, c=1, **more):
    return a


CALLABLES = {
    "function": _function,
    "lambda": lambda x, y=5: x,
    "bound method": _Plain().process,
    "classmethod": _Plain.make,
    "stateful DoFn's process": _Counting().process,
    "partial": functools.partial(_function, 1),
    "callable object": _CallableObject(),
    "builtin": len,
    "method descriptor": str.strip,
}


@pytest.mark.parametrize("name", CALLABLES)
def test_answers_as_beam_does(name):
    f = CALLABLES[name]
    assert args_and_defaults(f) == beams_own(f)
    assert args_and_defaults(f) == beams_own(f)  # asked again: from memory for functions and methods


def test_a_method_is_looked_up_once_whatever_it_is_bound_to():
    class Later(beam.DoFn):
        def process(self, element, side=beam.DoFn.SideInputParam):
            yield element

    first = args_and_defaults(Later().process)
    # A signature changed after the first question is not seen: Beam is not asked again, for this
    # instance or another one.
    Later.process.__signature__ = inspect.Signature([inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)])
    assert args_and_defaults(Later().process) == first == (["element", "side"], [beam.DoFn.SideInputParam])
    assert beams_own(Later().process) == ([], [])


def test_callers_get_lists_of_their_own():
    args, defaults = args_and_defaults(_function)
    args.append("changed")
    defaults.append("changed")
    assert args_and_defaults(_function) == (["a", "b"], [])


def test_functions_are_held_weakly():
    f = eval("lambda x, y=1: x")  # a fresh function no module holds
    args_and_defaults(f)
    gone = weakref.ref(f)
    del f
    gc.collect()
    assert gone() is None


def test_pipelines_inspect_through_it_and_state_still_works():
    p = make_pipeline(pipeline_options([], 0))
    assert core.get_function_args_defaults is args_and_defaults
    assert userstate.is_stateful_dofn(_Counting())
    assert not userstate.is_stateful_dofn(_Plain())
    with p:
        totals = p | beam.Create([("a", 1), ("a", 2), ("b", 5)]) | beam.ParDo(_Counting())
        assert_that(totals | beam.combiners.Top.LargestPerKey(1), equal_to([("a", [3]), ("b", [5])]))


def test_beam_still_refuses_a_dofn_with_a_parameter_twice():
    class Twice(beam.DoFn):
        def process(self, element, a=beam.DoFn.StateParam(COUNT), b=beam.DoFn.StateParam(COUNT)):
            yield element

    make_pipeline(PipelineOptions([]))
    with pytest.raises(ValueError, match="duplicate"):
        userstate.validate_stateful_dofn(Twice())
