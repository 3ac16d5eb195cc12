"""The project's code as the chokepoint tests read it (tests/test_opening.py, test_quoting.py,
test_printing.py): every module of the four packages parsed once, and each call in it with the
dotted name it is made by (`tf.io.gfile.GFile`, `storage.read_text`, `open`) and the function it
is made in, so that a test can say which calls of a guarded kind exist outside the one place that
may make them."""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Iterator

from tests.test_code_map import MODULES


@dataclasses.dataclass(frozen=True)
class Call:
    module: str  # core.storage
    function: str  # the enclosing function (Class.method), or "" at module level
    name: str  # the dotted name called: open, os.open, tf.io.gfile.GFile, storage.read_text
    node: ast.Call

    @property
    def site(self) -> str:
        return f"{self.module}:{self.node.lineno} {self.function or '(module)'}: {self.name}(...)"

    def keyword(self, name: str) -> ast.expr | None:
        return next((k.value for k in self.node.keywords if k.arg == name), None)


def dotted(node: ast.expr) -> str:
    """`a.b.c` for a Name or a chain of Attributes on one; the attribute chain's end otherwise
    (`x().read_text` is `.read_text`)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    else:
        parts.append("")
    return ".".join(reversed(parts))


@functools.cache
def tree(module: str) -> ast.Module:
    path = MODULES[module]
    return ast.parse(path.read_text(), str(path))


def calls() -> Iterator[Call]:
    """Every call in every module of the project, with the function it is made in."""
    for module in sorted(MODULES):
        yield from _calls_in(module, tree(module), "")


def _calls_in(module: str, node: ast.AST, function: str) -> Iterator[Call]:
    for child in ast.iter_child_nodes(node):
        inner = function
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner = f"{function}.{child.name}" if function else child.name
        if isinstance(child, ast.Call):
            yield Call(module, function, dotted(child.func), child)
        yield from _calls_in(module, child, inner)
