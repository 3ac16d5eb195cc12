"""The project's own code, read as syntax trees (ast), for the scans that prove a trust invariant
has one chokepoint: every place a module reaches the guarded thing, named by the function it is
in, so that a scan can allow exactly the chokepoint and the exceptions it lists by name
(tests/test_deletes.py, tests/test_endings.py, tests/test_folder_kinds.py, tests/test_opening.py,
test_quoting.py, test_printing.py), and the names each module reaches through its imports
(tests/test_bounded_parsers.py, tests/test_manifest_reads.py). Each module is parsed once."""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from tests.test_code_map import MODULES, PACKAGES

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


@dataclasses.dataclass(frozen=True)
class Call:
    """A call and where it is made, with the dotted name it is made by (`tf.io.gfile.GFile`,
    `storage.read_text`, `open`)."""

    module: str  # core.storage
    function: str  # the enclosing function (Class.method), or "" at module level
    name: str  # the dotted name called: open, os.open, tf.io.gfile.GFile, storage.read_text
    node: ast.Call

    @property
    def site(self) -> str:
        return f"{self.module}:{self.node.lineno} {self.function or '(module)'}: {self.name}(...)"

    def keyword(self, name: str) -> ast.expr | None:
        return next((k.value for k in self.node.keywords if k.arg == name), None)


@functools.cache
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


def calls(packages=PACKAGES) -> Iterator[Call]:
    """Every call in every module of `packages` (all four by default: the trainer's too), with the
    function it is made in."""
    for place in places(packages):
        if isinstance(place.node, ast.Call):
            yield Call(place.module, place.function, dotted(place.node.func), place.node)


def dotted(node: ast.expr) -> str:
    """`a.b.c` for a Name or a chain of Attributes on one; the attribute chain's end otherwise
    (`x().read_text` is `.read_text`)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    parts.append(node.id if isinstance(node, ast.Name) else "")
    return ".".join(reversed(parts))


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


# --- names: what each module reaches through its imports (tests/test_bounded_parsers.py,
# tests/test_manifest_reads.py)


class Reach(NamedTuple):
    """A module, or an attribute of one, that a file imports or uses, on `line`; `called` when the
    use is a call."""

    line: int
    name: str  # dotted, through the imports: `yaml.safe_load`, `core.contract.json_text.loads`
    called: bool


def reached(module: str) -> list[Reach]:
    """Every name of another module that `module` imports or uses: `import yaml` is `yaml`,
    `yaml.safe_load(...)` a call of `yaml.safe_load`, `from csv import reader as r; r(...)` a call
    of `csv.reader`, a name bound by `import ... as` followed to its module."""
    module_tree = tree(module)
    bound: dict[str, str] = {}
    found = []
    for node in ast.walk(module_tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                bound[alias.asname or top] = alias.name if alias.asname else top
                found.append(Reach(node.lineno, alias.name, False))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                found.append(Reach(node.lineno, f"{node.module}.{alias.name}", False))
    called = {id(node.func) for node in ast.walk(module_tree) if isinstance(node, ast.Call)}
    for node in ast.walk(module_tree):
        chain = []
        inner = node
        while isinstance(inner, ast.Attribute):
            chain.append(inner.attr)
            inner = inner.value
        if isinstance(inner, ast.Name) and inner.id in bound and (chain or node is inner):
            found.append(Reach(node.lineno, ".".join([bound[inner.id], *reversed(chain)]), id(node) in called))
    return found


def _matches(name: str, names: Iterable[str]) -> bool:
    return any(name == n or name.startswith(n + ".") for n in names)


def bypasses(names: Iterable[str], allowed: Iterable[str] = (), called: bool = False) -> list[str]:
    """`module:line name` wherever a module other than those `allowed` reaches one of `names` (or
    a name below one), or only calls one when `called`."""
    names, allowed = tuple(names), set(allowed)
    return sorted(
        f"{module}:{reach.line} {reach.name}"
        for module in MODULES
        if module not in allowed
        for reach in reached(module)
        if _matches(reach.name, names) and (reach.called or not called)
    )


def users(names: Iterable[str], called: bool = False) -> set[str]:
    """The modules that reach (or call) one of `names`."""
    return {found.split(":", 1)[0] for found in bypasses(names, called=called)}
