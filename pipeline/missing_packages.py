"""One line, not a traceback, when `python -m pipeline` starts in a Python that lacks the packages
it needs: the system's `python3` in a source checkout, outside the project's environment (.venv),
would otherwise end in a 30-line traceback from the first import of Beam (pipeline.beam_patches
asks the installation for Beam's release before anything). Standard library only: it runs before
anything else is imported, and says what is missing and how to get it.
"""

from __future__ import annotations

import pathlib
import sys

# The packages of this project: a module of theirs that does not import is a bug, not a missing install.
OWN_PACKAGES = ("core", "pipeline", "transforms", "trainer")
CHECKOUT = pathlib.Path(__file__).resolve().parents[1]


def missing_package(error: ModuleNotFoundError) -> str | None:
    """The installed package `error` says this Python lacks (importlib.metadata's
    PackageNotFoundError is a ModuleNotFoundError naming the distribution, `apache-beam`), or None
    when the module that did not import is one of this project's own."""
    top = (error.name or "").split(".")[0]
    return None if not top or top in OWN_PACKAGES else top


def how_to_get_them() -> str:
    """What gives this command its packages: in a source checkout its environment (.venv, made by
    scripts/run_sample.sh or scripts/test.sh), or an install into this Python; elsewhere, the
    install (pip resolves the dependencies again)."""
    if not (CHECKOUT / "setup.py").is_file():
        return "reinstall it into this Python: pip install tfrecord-pipeline"
    venv = CHECKOUT / ".venv"
    made = "" if (venv / "bin" / "python").is_file() else " (bash scripts/run_sample.sh makes it)"
    return (
        f"run it in the project's environment: source {venv}/bin/activate{made}; "
        f"or install it here: pip install {CHECKOUT}"
    )


def refusal(command: str, package: str) -> str:
    """The line `command` ends with when this Python lacks `package`."""
    needs = f"this Python ({sys.executable}) has no {package}, which the pipeline needs"
    return f"{command}: error: {needs}: {how_to_get_them()}"
