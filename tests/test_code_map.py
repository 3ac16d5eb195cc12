"""The package structure the README's Code map describes, checked against the imports in the code:
which way imports go, no circles, and a dataset contract (with what else the trainer takes of
core/) that needs neither Beam nor TensorFlow."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("core", "pipeline", "transforms", "trainer")
# Which packages each may import, bottom up: core/ is shared, transforms/ are the Beam steps,
# pipeline/ is the application; the trainer takes only the dataset contract, the one opener of
# local files and the escaper of what it prints (TRAINER_CORE).
TRAINER_CORE = ("core.contract", "core.local_files", "core.shown")
MAY_IMPORT = {
    "core": ("core",),
    "transforms": ("core", "transforms"),
    "pipeline": ("core", "transforms", "pipeline"),
    "trainer": (*TRAINER_CORE, "trainer"),
}


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _project_imports(path: pathlib.Path) -> set[str]:
    """The project modules a file imports (`from core import storage` counts as core.storage)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {n for n in names if n.split(".")[0] in PACKAGES}
    return found


MODULES = {_module_name(p): p for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))}


def _imports_of(module: str) -> set[str]:
    """Imported names that are modules of the project (a package counts as its __init__)."""
    return {name for name in _project_imports(MODULES[module]) if name in MODULES and name != module}


def _within(module: str, prefixes) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_module_table_covers_the_packages():
    assert {
        "pipeline.cli",
        "core.contract.manifest",
        "core.storage",
        "transforms.images",
        "trainer.train",
    } <= set(MODULES)


def test_no_import_circles():
    graph = {module: _imports_of(module) for module in MODULES}
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                pytest.fail("import circle: " + " -> ".join(path[path.index(target) :] + [target]))
            if target not in state:
                visit(target, path + [target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("core.contract")))
def test_the_contract_imports_only_itself(module):
    assert all(_within(name, ["core.contract"]) or name == "core" for name in _imports_of(module))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_layers(module):
    allowed = MAY_IMPORT[module.split(".")[0]]
    outside = {n for n in _imports_of(module) if not _within(n, allowed) and n != "core"}
    assert not outside, f"{module} imports {sorted(outside)}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("pipeline.commands.")))
def test_no_command_imports_another(module):
    others = {n for n in _imports_of(module) if _within(n, ["pipeline.commands", "pipeline.cli"])}
    assert not others, f"{module} imports {sorted(others)}"


@pytest.mark.parametrize(
    "module",
    sorted(
        m
        for m in MODULES
        if m.startswith("pipeline.")
        and not m.startswith(("pipeline.commands", "pipeline.cli", "pipeline.dataflow", "pipeline.__main__"))
    ),
)
def test_library_modules_import_no_command(module):
    commands = {n for n in _imports_of(module) if _within(n, ["pipeline.commands", "pipeline.cli"])}
    assert not commands, f"{module} imports {sorted(commands)}"


def test_what_the_trainer_takes_of_core_loads_nothing_but_the_standard_library():
    contract = sorted(m for m in MODULES if _within(m, TRAINER_CORE))
    code = (
        "import sys\nbefore = set(sys.modules)\n"
        + "".join(f"import {m}\n" for m in contract)
        + "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        + "print(sorted(new - set(sys.stdlib_module_names) - {'core'}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert result.stdout.strip() == "[]", result.stdout
