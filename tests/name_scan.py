"""What each module of the product reaches by name, read from its syntax tree (as
tests/test_code_map.py reads its imports): for the tests that prove one function is the only way to
something (tests/test_bounded_parsers.py, tests/test_manifest_reads.py)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import NamedTuple

from tests.test_code_map import MODULES  # the product's modules: core, pipeline, transforms, trainer


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
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    bound: dict[str, str] = {}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                bound[alias.asname or top] = alias.name if alias.asname else top
                found.append(Reach(node.lineno, alias.name, False))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                found.append(Reach(node.lineno, f"{node.module}.{alias.name}", False))
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
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
