"""Beam's repeated lookups through pipeline.beam_lookups: a function's arguments and defaults as
Beam's own `get_function_args_defaults` gives them, asked once per function, held weakly, given
to each caller as lists of its own; one view of the options per class, sharing their values as
Beam's views do; and once remember_lookups has run, a pipeline looks both up that way, with
Beam's state and timer checks working as before. Skipped where the patches are off (pipeline.beam_patches): the
module then meets a Beam it may not fit, and nothing runs it."""

import functools
import gc
import inspect
import weakref

import apache_beam as beam
import pytest
from apache_beam.coders import VarIntCoder
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import core, userstate

from pipeline import beam_patches
from pipeline.runners import make_pipeline, pipeline_options

if not beam_patches.wanted():
    pytest.skip("Beam's start-up patches are off here (pipeline.beam_patches)", allow_module_level=True)

# Imported only where the patches are on: it reads Beam's internals as it is imported.
from pipeline.beam_lookups import _ASK_BEAM as beams_own  # noqa: E402
from pipeline.beam_lookups import _BEAMS_VIEW as beams_view  # noqa: E402
from pipeline.beam_lookups import args_and_defaults, option_view, remember_lookups  # noqa: E402

COUNT = userstate.ReadModifyWriteStateSpec("count", VarIntCoder())
COUNT_STATE = beam.DoFn.StateParam(COUNT)


class _Plain(beam.DoFn):
    def process(self, element, timestamp=beam.DoFn.TimestampParam, extra=3):
        yield element

    @classmethod
    def make(cls, name, size=1):
        return cls()


class _Counting(beam.DoFn):
    def process(self, element, count=COUNT_STATE):
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


def test_one_view_per_options_and_class_sharing_the_values():
    options = PipelineOptions(["--runner", "SomeRunner", "--direct_num_workers", "3"])
    standard = option_view(options, StandardOptions)
    assert option_view(options, StandardOptions) is standard
    assert option_view(PipelineOptions([]), StandardOptions) is not standard
    assert (standard.runner, option_view(options, DirectOptions).direct_num_workers) == ("SomeRunner", 3)
    standard.runner = "Another"
    assert beams_view(options, StandardOptions).runner == "Another"
    beams_view(options, StandardOptions).streaming = True
    assert standard.streaming


def test_options_are_held_weakly():
    options = PipelineOptions([])
    option_view(options, StandardOptions)
    gone = weakref.ref(options)
    del options
    gc.collect()
    assert gone() is None


@pytest.fixture
def remembered(monkeypatch):
    """Beam looking both up through this module for one test, and as it was after it."""
    monkeypatch.setattr(core, "get_function_args_defaults", beams_own)
    monkeypatch.setattr(PipelineOptions, "view_as", beams_view)
    remember_lookups()


def test_pipelines_look_up_through_it_and_state_still_works(remembered):
    p = make_pipeline(pipeline_options([], 0))
    assert core.get_function_args_defaults is args_and_defaults
    assert PipelineOptions.view_as is option_view
    assert userstate.is_stateful_dofn(_Counting())
    assert not userstate.is_stateful_dofn(_Plain())
    with p:
        totals = p | beam.Create([("a", 1), ("a", 2), ("b", 5)]) | beam.ParDo(_Counting())
        assert_that(totals | beam.combiners.Top.LargestPerKey(1), equal_to([("a", [3]), ("b", [5])]))


def test_beam_still_refuses_a_dofn_with_a_parameter_twice(remembered):
    class Twice(beam.DoFn):
        def process(self, element, a=COUNT_STATE, b=COUNT_STATE):
            yield element

    with pytest.raises(ValueError, match="duplicate"):
        userstate.validate_stateful_dofn(Twice())
