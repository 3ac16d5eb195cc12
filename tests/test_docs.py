"""The README and docs/ as a reader meets them: every link and every path they name leads somewhere,
they speak of the product (no development history), the README stays short, and its quick start
runs as written."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.subprocess_limits import SUBPROCESS_TIMEOUT

REPO = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", REPO / "trainer" / "README.md", *(REPO / "docs").glob("*.md")])
README_MOST_LINES = 300

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
# A path of the repository as the docs name one: a top-level folder, then a file with an extension.
_REPO_PATH = re.compile(r"^(core|pipeline|transforms|trainer|scripts|tests|configs|docker|docs|sample)/[\w./-]*\.\w+$")
# Words that date a page to how the project was built rather than what it is.
_HISTORY = re.compile(r"this VM|\bsessions?\b|\bwork periods?\b|\bissue \d+|\bat [0-9a-f]{7,40}\b|\bused to\b", re.I)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: pathlib.Path) -> set[str]:
    prose = _FENCE.sub("", page.read_text())
    return {_slug(line.lstrip("#")) for line in prose.splitlines() if line.startswith("#")}


def _prose(page: pathlib.Path) -> str:
    return _FENCE.sub("", page.read_text())


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_leads_to_a_file_and_heading(page):
    broken = []
    for target in _LINK.findall(_prose(page)):
        if re.match(r"^[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_path_named_in_code_exists(page):
    named = {m.split(":")[0].split()[0] for m in _CODE.findall(page.read_text())}
    missing = sorted(p for p in named if _REPO_PATH.match(p) and "*" not in p and not (REPO / p).exists())
    assert not missing, f"{page.relative_to(REPO)} names {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_pages_speak_of_the_product_not_its_history(page):
    found = [
        f"line {n}: {m.group(0)!r}"
        for n, line in enumerate(page.read_text().splitlines(), 1)
        for m in _HISTORY.finditer(line)
    ]
    assert not found, f"{page.relative_to(REPO)}: {found}"


def test_every_page_is_linked_from_the_readme():
    linked = {(REPO / target.partition("#")[0]).resolve() for target in _LINK.findall(_prose(REPO / "README.md"))}
    assert set((REPO / "docs").glob("*.md")) <= linked


def test_the_readme_is_short():
    lines = len((REPO / "README.md").read_text().splitlines())
    assert lines <= README_MOST_LINES, (
        f"README.md has {lines} lines (at most {README_MOST_LINES}: the rest goes to docs/)"
    )


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_the_quick_start_runs_as_written(tmp_path):
    """Every command of the README's quick start, in order, from a folder holding the sample, and
    then its Python snippet reading what they wrote."""
    readme = (REPO / "README.md").read_text()
    commands = [
        block for lang, block in _FENCE.findall(_section(readme, "Quick start on your own data")) if lang == "bash"
    ]
    [snippet] = [block for lang, block in _FENCE.findall(_section(readme, "What you get")) if lang == "python"]
    assert len(commands) == 3
    (tmp_path / "sample").symlink_to(REPO / "sample")
    env = {
        **os.environ,
        "PATH": f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "TMPDIR": str(tmp_path),
    }
    script = "set -euo pipefail\n" + "\n".join(commands).replace("/tmp/", f"{tmp_path}/")
    result = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("verify OK") == 3, result.stdout[-3000:]
    snippet += "\nprint(sum(1 for _ in examples))\n"
    result = subprocess.run(
        [sys.executable, "-c", snippet],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout.split()[-1]) > 0


def test_the_grain_snippet_reads_an_array_record_conversion(tmp_path):
    """docs/reading.md's Grain snippet, as written, on the sample converted with --format array_record."""
    reading = (REPO / "docs" / "reading.md").read_text()
    [snippet] = [block for lang, block in _FENCE.findall(reading) if lang == "python" and "grain" in block]
    argv = ["--input", str(REPO / "sample" / "images"), "--output", "out/shapes", "--format", "array_record"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for command in ([sys.executable, "-m", "pipeline", *argv], [sys.executable, "-c", snippet + _COUNT_EPOCH]):
        result = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT
        )
        assert result.returncode == 0, result.stderr[-3000:]
    records, labels = result.stdout.split()[-2:]
    assert int(records) == json.loads((tmp_path / "out/shapes/manifest.json").read_text())["splits"]["train"]["records"]
    assert int(labels) > 1


_COUNT_EPOCH = "\nparsed = list(epoch)\nprint(len(parsed), len({int(e['image/class/label']) for e in parsed}))\n"
