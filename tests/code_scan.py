"""The project's own code, read as syntax trees (ast), for the scans that prove a trust invariant
has one chokepoint: every place a module reaches the guarded thing, named by the function it is
in, so that a scan can allow exactly the chokepoint and the exceptions it lists by name
(tests/test_deletes.py, tests/test_endings.py, tests/test_folder_kinds.py)."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator

from tests.test_code_map import MODULES

LIBRARY = ("core", "pipeline", "transforms")  # the packages a run executes


@dataclasses.dataclass(frozen=True)
class Place:
    """A node of a module's tree and where it is: the module and its enclosing function's
    qualified name (`Class.method`, `outer.inner`; "" at module level)."""

    module: str
    function: str
    node: ast.AST

    def __str__(self) -> str:
        return f"{self.module}:{getattr(self.node, 'lineno', '?')} (in {self.function or 'the module'})"


def tree(module: str) -> ast.Module:
    path = MODULES[module]
    return ast.parse(path.read_text(), str(path))


def places(packages=LIBRARY) -> Iterator[Place]:
    """Every node of every module of `packages`, with where it is."""
    for module in sorted(MODULES):
        if module.split(".")[0] in packages:
            yield from places_in(module, tree(module))


def places_in(module: str, node: ast.AST, function: str = "") -> Iterator[Place]:
    """Every node below `node` of `module` (a scan's own tests pass it code of their own)."""
    for child in ast.iter_child_nodes(node):
        yield Place(module, function, child)
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield from places_in(module, child, f"{function}.{child.name}" if function else child.name)
        else:
            yield from places_in(module, child, function)


def attribute_name(node: ast.AST) -> str | None:
    """The name a reference ends in: `x` for `x` and for `a.b.x`; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def receiver(node: ast.AST) -> str | None:
    """What an attribute is taken of, as a name: `storage` for `storage.delete`, `fence` for
    `self.fence.delete`; None for a plain name or anything else."""
    if isinstance(node, ast.Attribute):
        return attribute_name(node.value)
    return None
