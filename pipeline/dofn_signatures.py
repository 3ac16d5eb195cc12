"""Beam reads the signature of each DoFn method once per function, not once per question.

Whether a DoFn uses state or timers, and which parameters its methods take, Beam works out from
the methods' signatures (`core.get_function_args_defaults`, one `inspect.signature` each) every
time it asks: for each DoFn as the graph is built, again for each override a local runner
considers, and again for every bundle a local runner starts, each time for every method of the
DoFn. A lean local run asked thousands of times for a few dozen functions (README, Performance).

The answer depends only on the function: a bound method's is its function's, less the bound
argument, whatever object it is bound to. So `remember_signatures` has Beam look each function up
once; functions are held weakly (a Map's lambda goes with its pipeline), anything else that is
callable (a partial, a callable object, a builtin) is looked up as before, and every caller gets
lists of its own.
"""

from __future__ import annotations

import types
import weakref

from apache_beam.transforms import core

_ASK_BEAM = core.get_function_args_defaults
_OF_FUNCTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_OF_METHODS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # by the method's function


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


def remember_signatures() -> None:
    """Makes Beam's DoFn inspection in this process go through args_and_defaults."""
    core.get_function_args_defaults = args_and_defaults
