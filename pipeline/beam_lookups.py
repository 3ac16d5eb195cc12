"""What Beam works out again and again while it builds and runs a job, worked out once.

Two of Beam's lookups are pure, yet repeated for every transform as the graph is built, again for
each override a local runner considers, and again for every bundle a local runner starts: a lean
local run spent most of a second of its start-up on them (docs/performance.md).

* Which parameters a DoFn's methods take (state, timers, `DoFn.ElementParam`, ...): Beam reads
  each method's signature (`core.get_function_args_defaults`, one `inspect.signature`) every time
  it asks, thousands of times for a few dozen functions. The answer depends only on the function:
  a bound method's is its function's, less the bound argument, whatever it is bound to.
* A view of the job's options as one options class (`PipelineOptions.view_as`): Beam builds an
  argument parser for the class and parses the flags again for each of the views it asks for.
  Views are windows on the options' one shared store of values (setting a value through a view
  sets it for all of them) over flags that never change, so one view per class serves.

`remember_lookups` (applied through pipeline.beam_patches only) has Beam ask each once: functions
and options are held weakly (a Map's lambda goes with its pipeline); anything else callable (a
partial, a callable object, a builtin) is looked up as before, and every caller of the first
lookup gets lists of its own.
"""

from __future__ import annotations

import types
import weakref

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import core

_ASK_BEAM = core.get_function_args_defaults
_BEAMS_VIEW = PipelineOptions.view_as
_OF_FUNCTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_OF_METHODS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # by the method's function
_VIEWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # options -> {options class: view}


def args_and_defaults(f) -> tuple[list[str], list]:
    """What `core.get_function_args_defaults(f)` returns, asked of Beam once per function."""
    if isinstance(f, types.MethodType) and isinstance(f.__func__, types.FunctionType):
        known, key = _OF_METHODS, f.__func__
    elif isinstance(f, types.FunctionType):
        known, key = _OF_FUNCTIONS, f
    else:
        return _ASK_BEAM(f)
    answer = known.get(key)
    if answer is None:
        answer = known[key] = _ASK_BEAM(f)
    args, defaults = answer
    return list(args), list(defaults)


def option_view(options: PipelineOptions, cls: type) -> PipelineOptions:
    """What `options.view_as(cls)` returns, made by Beam once per options object and class."""
    views = _VIEWS.get(options)
    if views is None:
        views = _VIEWS[options] = {}
    view = views.get(cls)
    if view is None:
        view = views[cls] = _BEAMS_VIEW(options, cls)
    return view


def remember_lookups() -> None:
    """Makes Beam in this process look both up through args_and_defaults and option_view."""
    core.get_function_args_defaults = args_and_defaults
    PipelineOptions.view_as = option_view
