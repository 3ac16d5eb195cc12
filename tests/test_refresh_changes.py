"""What a refresh version says changed since the version before it, after real refreshes of real
files: sources added, removed and changed between two refreshes (on the GCS emulator too:
tests/test_refresh.py), records per split and label before -> after, a CSV column retyped; in `inspect`'s
lines and in its HTML report, opened in Debian's chromium (figures in the DOM, a hostile file name
shown and never run, no console message)."""

from __future__ import annotations

import json
import pathlib
import shutil

from tests import broken_images
from tests.subprocess_limits import run_pipeline
from tests.test_html_report import chromium

SAMPLE = pathlib.Path(__file__).resolve().parents[1] / "sample" / "images"
HOSTILE = "<img src=x onerror=document.title='run'>.jpg"  # an added source's name


def test_the_report_of_a_refresh_shows_what_changed_in_a_browser(tmp_path):
    source = tmp_path / "src"
    for label in ("circle", "square"):
        shutil.copytree(SAMPLE / label, source / label)
    root = tmp_path / "root"
    assert run_pipeline(["refresh", "--input", str(source), "--output", str(root)]).returncode == 0
    gone = sorted((source / "circle").iterdir())[:3]
    for path in gone:
        path.unlink()
    (source / "square" / HOSTILE).write_bytes(broken_images.image_bytes("JPEG", "RGB"))
    first = sorted((source / "square").iterdir())[0]
    first.write_bytes(first.read_bytes() + b"\0")  # the same image, a byte longer
    done = run_pipeline(["refresh", "--input", str(source), "--output", str(root)])
    assert done.returncode == 0, done.stderr
    page = tmp_path / "report.html"
    done = run_pipeline(["inspect", str(root), "--report", str(page)])
    assert done.returncode == 0, done.stderr
    assert "sources: 1 added, 3 removed, 1 changed" in done.stdout
    assert f"removed: circle/{gone[0].name}, circle/{gone[1].name}, circle/{gone[2].name}" in done.stdout

    browser = chromium("--dump-dom", page.as_uri())
    assert browser.returncode == 0 and "CONSOLE" not in browser.stderr, browser.stderr[-2000:]
    dom = browser.stdout
    for kind, n in (("added", 1), ("removed", 3), ("changed", 1)):
        assert f'id="sources-{kind}">{n}</td>' in dom
    assert "<code>square/&lt;img src=x onerror=document.title='run'&gt;.jpg</code>" in dom
    assert "<title>images dataset" in dom and '<img src="x"' not in dom  # the name's tag never ran
    assert f"<code>square/{first.name}</code>" in dom and f"<code>circle/{gone[0].name}</code>" in dom
    versions = sorted(p.name for p in root.iterdir() if p.name != "LATEST")
    labels = {
        version: json.loads((root / version / "manifest.json").read_text())["splits"]["train"]["label_counts"]
        for version in versions
    }
    before, after = (labels[v]["circle"] for v in versions)
    assert f'<td>train / circle</td><td class="n">{before:,}</td><td class="n">{after:,}</td>' in dom
    assert 'id="label-distance">' in dom and "Jensen-Shannon divergence" in dom

    shutil.rmtree(root / versions[0])  # as retention would: the version is still shown, not compared
    done = run_pipeline(["inspect", str(root), "--report", str(page)])
    assert done.returncode == 0, done.stderr
    assert f"since version {versions[0]}: not compared, " in done.stdout
    assert "Not compared: " in page.read_text()


def test_a_retyped_csv_column_is_shown_and_the_held_version_says_how_to_promote_it(tmp_path):
    source, root = tmp_path / "table", tmp_path / "root"
    source.mkdir()
    rows = "\n".join(f"{i},{i * 0.5},{'ab'[i % 2]}" for i in range(200))
    (source / "part-0.csv").write_text("id,x,label\n" + rows + "\n")
    flags = ["refresh", "--kind", "csv", "--input", str(source / "*.csv"), "--output", str(root)]
    assert run_pipeline(flags).returncode == 0
    rows = "\n".join(f"{i},v{i},{'ab'[i % 2]}" for i in range(200))
    (source / "part-0.csv").write_text("id,x,label\n" + rows + "\n")
    (source / "part-1.csv").write_text("id,x,label\n7,v7,a\n")
    assert run_pipeline(flags).returncode == 4  # held: its column x changed type
    held = sorted(p.name for p in root.iterdir() if p.name != "LATEST")[-1]
    page = tmp_path / "report.html"
    done = run_pipeline(["inspect", str(root / held), "--report", str(page)])
    assert done.returncode == 0, done.stderr
    assert "column x: float32 -> string" in done.stdout
    assert "sources: 1 added, 0 removed, 1 changed" in done.stdout
    assert "added: part-1.csv" in done.stdout and "changed: part-0.csv" in done.stdout
    promote = f"python -m pipeline refresh --output {root} --promote {held}"
    assert "held: LATEST was not moved" in done.stdout and promote in done.stdout
    browser = chromium("--dump-dom", page.as_uri())
    assert browser.returncode == 0 and "CONSOLE" not in browser.stderr, browser.stderr[-2000:]
    dom = browser.stdout
    assert "<td>column x</td><td>float32 → string</td>" in dom
    assert 'id="held"' in dom and "LATEST was not moved" in dom and promote in dom
    assert "column 'x': float32 -&gt; string (its type changed)" in dom

    assert run_pipeline(["refresh", "--output", str(root), "--promote", held]).returncode == 0
    done = run_pipeline(["inspect", str(root)])
    assert "then promoted: LATEST names it" in done.stdout and promote not in done.stdout
