"""Opening a local file without waiting or reading forever, or reading outside its folder: the
one opener of every local file the user or a manifest names (`open_regular`).

A FIFO's open waits for a writer, and a device read through a link (`x.csv -> /dev/zero`) never
ends, so a run given one would hang: only regular files (or links to them) are read, and the
rest raise NotARegularFile, which callers turn into a dead letter or a refusal naming the file.
A dataset's files (its manifest, shards, indexes, reports), a refresh root's LATEST and a lease
are opened `inside` their folder: a link among them that leads out of it raises LeadsOutside, so
that whoever may write DEST or ROOT cannot make a reader read, or quote, a file elsewhere. Inputs
are read as the user who runs the job: their links are followed wherever they lead.
A link whose target does not exist is named by `dangling`, for listings that would drop it.
No Beam: the converting processes (transforms.image_convert), the trainer (its manifest, the
shards it hands to tf.data) and the process entry, before Beam is imported
(pipeline.unused_modules, reading the config file), open their files here too.
Settings files are read here (load_yaml), so every command refuses one that is not UTF-8 or not
YAML in the same words, and one too large: a settings file is a few kB, and YAML's aliases let 1 kB
stand for gigabytes ("billion laughs": `b: &b [*a, *a, ...]` nine levels deep), which every
reader of the values (the checks of pipeline.config, the repr of a bad value) would walk. The
file's bytes and the nodes of its document with every alias expanded are bounded, the nodes
counted without expanding anything (yaml_nodes); small anchors keep working. So is how deep lists
and mappings nest: the YAML composer, and every reader of the values, recurse once per level, and
`[[[[...]]]]` thousands deep would end in Python's RecursionError; the parser's events are counted
as the composer takes them, so it stops at the bound, and aliases that nest what they name deeper
still are measured with the nodes. load_yaml is the one reader of YAML (tests/test_bounded_parsers.py
fails on any other).
"""

from __future__ import annotations

import os
import stat
from typing import Any, BinaryIO

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a folder"),
)


class NotARegularFile(OSError):
    """A local file that is a FIFO, socket, device or folder, or a link to one."""


class LeadsOutside(OSError):
    """A file opened inside a folder whose path leads out of that folder's real path (a link)."""


# A settings file is a few kB; this still holds a csv.schema of ten thousand columns, and the YAML
# parser (pure Python, for its messages) reads the most its bytes can write in a few seconds.
MAX_YAML_BYTES = 256 << 10
# More nodes than any YAML text within MAX_YAML_BYTES writes without aliases (a node takes a byte or
# more: `{a,b}`), so only alias expansion passes it; pydantic checks that many in about a second.
MAX_YAML_NODES = 1_000_000
# Levels of lists and mappings inside one another. A settings file nests a few (image.keys.label);
# Python's recursive readers of the values take several frames a level, of the 1,000 it allows.
MAX_YAML_DEPTH = 64


class NotYaml(ValueError):
    """Settings that are not UTF-8 text, not YAML, larger than MAX_YAML_BYTES or MAX_YAML_NODES, or
    nested deeper than MAX_YAML_DEPTH.
    The message (`is not valid YAML: ...`) says why and where; the caller puts the file or flag in
    front of it, for its refusal."""


def not_regular(path: str, mode: int) -> str | None:
    """Why the file at `path`, whose (followed) st_mode is `mode`, is not input; None when it is a
    regular file."""
    if stat.S_ISREG(mode):
        return None
    what = next((name for is_kind, name in _KINDS if is_kind(mode)), "not a file")
    if os.path.islink(path):
        what = f"a link to {os.path.realpath(path)}, {what}"
    return f"not a regular file: {what}"


def dangling(path: str) -> str | None:
    """'a link to TARGET, which does not exist (dangling link)' when `path` is a symbolic link
    whose target (followed to the end) is absent, else None. Listings stat each file and drop one
    they cannot stat, so a dangling link would vanish from the run without a word."""
    if os.path.islink(path) and not os.path.exists(path):
        return f"a link to {os.path.realpath(path)}, which does not exist (dangling link)"
    return None


def open_regular(path: str, *, inside: str | None) -> BinaryIO:
    """`path` open for binary reading if it is a regular file (or a link to one), else
    NotARegularFile saying what it is. With `inside` (a folder), only if the file opened lies
    below that folder's real path, else LeadsOutside naming where it leads; None for an input,
    read as the user (module docstring): every caller says which. Never waits, and the file's
    type and place are checked on what was opened, so a name swapped in between cannot slip past
    either check. A refusal of an input is the reason alone (its caller names the input: a dead
    letter, a refusal); one of a file inside a folder names the file and the fix, for readers
    that say it as it comes (inspect, the trainer, a run's lease)."""
    try:
        # O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer; regular
        # files read as they would without it.
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:  # a socket cannot be opened at all (ENXIO): say what it is
        reason = _stat_reason(path)
        if reason:
            raise _refused(NotARegularFile, reason, path, inside) from e
        raise
    try:
        opened = os.fstat(handle)
        reason = not_regular(path, opened.st_mode)
        if reason:
            raise _refused(NotARegularFile, reason, path, inside)
        if inside is not None:
            _check_inside(path, opened, inside)
    except BaseException:
        os.close(handle)
        raise
    return open(handle, "rb")


def check_regular(path: str, *, inside: str | None) -> None:
    """open_regular's checks, for a file that another library opens by its name (TensorFlow's
    tf.data, array_record): it is opened here first, and closed. The file may still be replaced
    between this check and that library's open, by whoever may write its folder."""
    open_regular(path, inside=inside).close()


def _check_inside(path: str, opened: os.stat_result, folder: str) -> None:
    """LeadsOutside unless the file `opened` (its fstat) is the one at `path`'s real path, and
    that lies below `folder`'s real path."""
    real, base = os.path.realpath(path), os.path.realpath(folder)
    if os.path.commonpath([real, base]) != base:
        raise _refused(LeadsOutside, f"leads out of {folder} to {real} through a link", path, folder)
    there = os.stat(real)
    if (there.st_dev, there.st_ino) != (opened.st_dev, opened.st_ino):
        raise _refused(LeadsOutside, "was replaced by a link while it was opened", path, folder)


def _refused(kind: type[OSError], reason: str, path: str, inside: str | None) -> OSError:
    if inside is None:
        return kind(reason)
    return kind(
        f"{path}: {reason} (each file of {inside} is read only as a regular file inside it: put the file "
        "itself there, or remove it)"
    )


def load_yaml(path: str) -> Any:
    """The YAML document in the settings file at `path` (None when empty), opened by open_regular
    (OSError when it cannot be read); NotYaml when it is not UTF-8 text, is a key (a PEM file, a
    JSON key: core.file_signatures), is not YAML, or is longer than MAX_YAML_BYTES (never read
    past them). What it is is named, and where it goes wrong, never its content: a key given as
    --config by mistake must not reach a terminal or a log. Decoded whole, so the offset of a bad
    byte is the file's, not that of a buffer."""
    from core.file_signatures import binary_kind, key_kind, what_it_is  # here only: the trainer reads no settings

    with open_regular(path, inside=None) as f:
        data = f.read(MAX_YAML_BYTES + 1)
    if len(data) > MAX_YAML_BYTES:
        raise NotYaml(f"is larger than {MAX_YAML_BYTES:,} bytes, the most a settings file may be (a few kB is usual)")
    binary = binary_kind(data[:_HEAD_BYTES])
    if binary:
        raise NotYaml(f"is {binary}, not YAML text in UTF-8: give the settings file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise NotYaml(
            f"is not UTF-8 text: byte 0x{data[e.start]:02x} at offset {e.start} (line {line}); it is "
            f"{what_it_is(data[:_HEAD_BYTES])}"
        ) from e
    key = key_kind(text[:_HEAD_BYTES])
    if key:
        raise NotYaml(f"is {key}, not a settings file (YAML): give the settings file, and keep the key out of --config")
    return parse_yaml(text)


_HEAD_BYTES = 4096  # of a settings file, that tell what it is
# What each kind of YAML error means, for a refusal that says where it is and never quotes the
# file: a YAML error's own message holds a snippet of the text, and its problem may quote a tag or
# an alias name, which in a file that is not settings could be anything (a key).
_YAML_PROBLEMS = (
    ("ScannerError", "a character YAML cannot read there (a tab for indentation, an unclosed quote?)"),
    ("ParserError", "a structure YAML cannot parse (an unclosed bracket, a key without its colon?)"),
    ("ComposerError", "an alias (*name) without its anchor (&name), or an anchor named twice"),
    ("ConstructorError", "a value the safe loader does not build (a !!python tag, a list as a key?)"),
    ("ReaderError", "a control character YAML does not allow"),
)


def parse_yaml(text: str) -> Any:
    """The YAML value of `text`; NotYaml, on one line, when it is not YAML or its document, aliases
    expanded, would hold more than MAX_YAML_NODES nodes or nest deeper than MAX_YAML_DEPTH (checked
    before any value is built). The refusal names the kind of problem and its line and column, and
    quotes nothing of `text`."""
    import yaml  # here only: the converting processes import this module and read no YAML

    loader = None
    try:
        loader = yaml.SafeLoader(text)  # which reads the text's first characters: a ReaderError too
        _bound_depth(loader, yaml)
        document = loader.get_single_node()
        if document is None:
            return None
        nodes, depth = yaml_nodes(document, MAX_YAML_NODES)
        if nodes > MAX_YAML_NODES:
            raise NotYaml(
                f"holds more than {MAX_YAML_NODES:,} values once its aliases (*name) are expanded, the most a "
                "settings file may: an alias of an alias of ... multiplies what it stands for"
            )
        if depth > MAX_YAML_DEPTH:
            raise _too_deep()
        return loader.construct_document(document)
    except NotYaml:
        raise
    except yaml.MarkedYAMLError as e:  # its text quotes the file: only its kind and place are told
        raise NotYaml(
            f"is not valid YAML: {_yaml_problem(e.__class__.__name__, e.problem_mark or e.context_mark)}"
        ) from e
    except yaml.reader.ReaderError as e:
        raise NotYaml(f"is not valid YAML: {_yaml_problem('ReaderError', None)} at character {e.position + 1:,}") from e
    except yaml.YAMLError as e:
        raise NotYaml(f"is not valid YAML: {_yaml_problem(e.__class__.__name__, None)}") from e
    except ValueError as e:  # an integer of more digits than Python converts (4,300), ...
        raise NotYaml("is not valid YAML: a value Python cannot convert (an integer of thousands of digits?)") from e
    finally:
        if loader is not None:
            loader.dispose()


def _yaml_problem(kind: str, mark) -> str:
    """What a YAML error of class `kind` means, in words of our own, and where (its mark, if any)."""
    problem = next((words for name, words in _YAML_PROBLEMS if name == kind), "text YAML cannot read")
    return problem if mark is None else f"{problem} at line {mark.line + 1}, column {mark.column + 1}"


def _bound_depth(loader, yaml) -> None:
    """Makes `loader` raise NotYaml on the first list or mapping nested deeper than MAX_YAML_DEPTH,
    as its composer takes the event that opens it: the composer recurses once per level, so the
    count must stop it before Python's recursion limit does."""
    get_event, depth = loader.get_event, 0

    def counted():
        nonlocal depth
        event = get_event()
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise _too_deep()
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        return event

    loader.get_event = counted


def _too_deep() -> NotYaml:
    return NotYaml(
        f"nests lists or mappings more than {MAX_YAML_DEPTH} levels deep, the most a settings file may (its "
        "settings nest a few levels: `image: {keys: {label: ...}}`)"
    )


def yaml_nodes(document, limit: int) -> tuple[int, int]:
    """The nodes of a composed YAML document with every alias expanded, and how deep they nest,
    found without expanding: an alias is the node it names, so each node's count and depth are
    found once, in time and memory linear in the text. Counts are capped just past `limit` (any
    result above it means "too many"), and an alias inside what it names (`&a [*a]`, endless once
    expanded) counts as past it."""
    counts: dict[int, tuple[int, int]] = {}
    expanding: set[int] = set()
    stack = [(document, False)]
    while stack:
        node, children_counted = stack.pop()
        key = id(node)
        if key in counts:
            continue
        children = _children(node)
        if children_counted:
            expanding.discard(key)
            below = [counts[id(child)] for child in children]
            nodes = min(limit + 1, 1 + sum(count for count, _ in below))
            nested = 1 + max((depth for _, depth in below), default=0) if isinstance(node.value, list) else 0
            counts[key] = nodes, nested
            continue
        if key in expanding:
            return limit + 1, 0  # a node that holds itself
        expanding.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in counts)
    return counts[id(document)]


def _children(node) -> list:
    """The nodes directly inside a YAML node: a sequence's items, a mapping's keys and values."""
    if isinstance(node.value, list):
        return [part for item in node.value for part in (item if isinstance(item, tuple) else (item,))]
    return []


def _stat_reason(path: str) -> str | None:
    try:
        return not_regular(path, os.stat(path).st_mode)
    except OSError:
        return None
