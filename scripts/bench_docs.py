"""Tables the benchmark scripts write into the docs themselves (``--docs PATH``), each with the
command that printed it and the machine it ran on: a page then holds current figures that a reader
can reproduce, never a hand-copied table that drifts from what the scripts measure.

A table goes between two markers in the markdown file, ``<!-- table: NAME -->`` and
``<!-- /table: NAME -->``; everything outside them is left as it is. Standard library only.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence

SCRIPTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(SCRIPTS_DIR)
# The packages whose versions decide the figures, as pip names them, and as the machine line names them.
VERSIONED_PACKAGES = (("apache-beam", "Apache Beam"), ("tensorflow", "TensorFlow"))
_NAME = re.compile(r"^[\w.-]+$")


class MissingBlock(SystemExit):
    """The markdown file has no single block of that name to write a table into: a script stops
    with this one line, before its runs when it checks first (check_blocks), not a traceback."""


# -- the table


def _cell(value: object) -> str:
    """A value as a table cell: a `|` would end the cell and a newline the row."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]], align: str | None = None) -> str:
    """A GitHub markdown table; `align` has an `l` or `r` per column (default: the first column
    left, the others right, as figures read best)."""
    align = align or "l" + "r" * (len(header) - 1)
    if len(align) != len(header) or set(align) - {"l", "r"}:
        raise ValueError(f"align {align!r}: one `l` or `r` per column of {list(header)}")
    lines = ["| " + " | ".join(map(_cell, header)) + " |"]
    lines.append("|" + "|".join("---" if a == "l" else "---:" for a in align) + "|")
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"row {list(row)} has {len(row)} cells for {len(header)} columns")
        lines.append("| " + " | ".join(map(_cell, row)) + " |")
    return "\n".join(lines)


def figures_table(
    rows: Iterable[Mapping[str, object]],
    columns: Sequence[tuple[str, Callable[[Mapping[str, object]], object]]],
    align: str | None = None,
) -> str:
    """A markdown table of `rows`, a column per (heading, the cell it makes of a row)."""
    return markdown_table(
        [heading for heading, _ in columns], [[cell(row) for _, cell in columns] for row in rows], align
    )


# -- the machine and the command


def cpu_model(cpuinfo: str) -> str | None:
    """The processor's name in /proc/cpuinfo's text (x86's `model name`; None where it has none)."""
    found = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    return " ".join(found.group(1).split()) if found else None


def memory_gb(meminfo: str) -> float | None:
    """MemTotal in /proc/meminfo's text, in GB."""
    found = re.search(r"^MemTotal:\s*(\d+) kB$", meminfo, re.M)
    return int(found.group(1)) * 1024 / 1e9 if found else None


def describe_machine(
    cpu: str | None,
    usable_cores: int,
    cores: int,
    memory: float | None,
    python: str,
    versions: Mapping[str, str],
    day: datetime.date,
) -> str:
    """The machine line every table states: what decides its figures, and when they were taken."""
    usable = f"{usable_cores} cores" if usable_cores == cores else f"{usable_cores} of {cores} cores usable"
    parts = [cpu or platform.machine(), usable]
    if memory is not None:
        parts.append(f"{memory:.1f} GB memory")
    parts.append(f"Python {python}")
    parts += [f"{name} {version}" for name, version in versions.items()]
    parts.append(day.isoformat())
    return ", ".join(parts)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def installed_versions() -> dict[str, str]:
    """{display name: version} of the VERSIONED_PACKAGES installed here (read from their metadata:
    importing TensorFlow to ask would cost seconds)."""
    versions = {}
    for package, name in VERSIONED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    return versions


def this_machine() -> str:
    """The machine line of the machine this runs on, today."""
    return describe_machine(
        cpu_model(_read("/proc/cpuinfo")),
        len(os.sched_getaffinity(0)),
        os.cpu_count() or 1,
        memory_gb(_read("/proc/meminfo")),
        platform.python_version(),
        installed_versions(),
        datetime.date.today(),
    )


def invoked_command(script: str, args: Sequence[str]) -> str:
    """The command a reader runs from the repository root to print the table again."""
    relative = os.path.relpath(os.path.abspath(script), REPO_ROOT)
    return shlex.join(["python", relative, *args])


# -- the block in the page


def _markers(name: str) -> tuple[str, str]:
    if not _NAME.match(name):
        raise ValueError(f"table name {name!r}: letters, digits, `_`, `.` and `-` only")
    return f"<!-- table: {name} -->", f"<!-- /table: {name} -->"


def _block_span(text: str, name: str) -> tuple[int, int]:
    """Where the named block's content starts and ends in `text`: after its opening marker, at its
    closing marker."""
    opening, closing = _markers(name)
    start = text.find(opening)
    end = text.find(closing, start + 1) if start != -1 else -1
    if start == -1 or end == -1 or text.count(opening) != 1 or text.count(closing) != 1:
        raise MissingBlock(
            f"no single block `{opening}` ... `{closing}` to write the table into "
            f"(put those two lines where the table goes)"
        )
    return start + len(opening), end


def block_body(table: str, command: str, machine: str) -> str:
    """What a block holds: the command that printed its table, the machine it ran on, the table."""
    return f"Printed by `{command}`, on {machine}:\n\n{table}"


def replace_block(text: str, name: str, body: str) -> str:
    """`text` with the named block holding `body` instead of what it held; the rest unchanged."""
    start, end = _block_span(text, name)
    return f"{text[:start]}\n\n{body}\n\n{text[end:]}"


def _in_page(path: str, text: str, name: str, body: str | None = None) -> str:
    """`text`, the page at `path`, with the named block holding `body` (None: checks it is there);
    a refusal names the page."""
    try:
        _block_span(text, name)
    except MissingBlock as e:
        raise MissingBlock(f"{path}: {e}") from None
    return text if body is None else replace_block(text, name, body)


def check_blocks(path: str, names: Iterable[str]) -> None:
    """Refuses, before a benchmark spends minutes, a page without a block for each of its tables."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for name in names:
        _in_page(path, text, name)


def write_tables(path: str, tables: Mapping[str, str], command: str, machine: str | None = None) -> None:
    """Writes each {name: markdown table} into its block of the page at `path`, stating `command`
    and the machine (this one, today, unless given); writes nothing unless every block is there."""
    machine = machine or this_machine()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for name, table in tables.items():
        text = _in_page(path, text, name, block_body(table, command, machine))
    target = os.path.realpath(path)  # a linked page is written where it lies, the link kept
    with open(f"{target}.tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(f"{target}.tmp", target)
    print(f"wrote {', '.join(tables)} into {path}")
