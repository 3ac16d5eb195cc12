"""Files on local disk and gs:// alike: the project's only file I/O outside TensorFlow's readers,
and the one place that decides what a path means.

A path is a name, never a pattern: listing, reading, writing, renaming and deleting take it
literally, so a folder called `exp[1]` or `gs://b/exp*` is that folder and no other. The one
pattern is a tabular run's `--input` (`list_matching`). Beam's FileSystems reads paths as glob
patterns in `match` and `delete` (and Beam's file sinks glob-delete their outputs' names), so
neither is called: listings go through os.scandir and the GCS client with a literal prefix, and
every delete names its paths, each with the evidence that makes it the product's (`delete`,
core.evidence): a name is never deleted for its shape.

No write follows a link: a local file is created new and exclusively (O_EXCL | O_NOFOLLOW), under a
fresh random name when it replaces another (`write_atomically`), and a link planted where a run
writes or deletes is removed as a link or left alone, never written through. A run's own folders
are made exclusively (`make_folder`), and a folder that is a link is never deleted into.

Everything is read and written uncompressed as stored (Beam would otherwise guess compression
from the extension), except `open_text`, which unwraps `.gz` for CSV readers, and `create`, which
writes GZIP on request. Local files are read only through core.local_files.open_regular: a FIFO,
socket or device (or a link to one) raises NotARegularFile instead of hanging the run, and every
read names the folder the file must lie in (`inside`: a dataset's files, a lease) or None (an
input, read as the user).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import functools
import gzip
import hashlib
import io
import logging
import os
import queue
import re
import shutil
import stat as stat_module
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO, NamedTuple

from apache_beam.io.filesystem import BeamIOError, CompressedFile, CompressionTypes, FileMetadata, FileSystem
from apache_beam.io.filesystems import FileSystems

from core import local_writes, range_listing
from core.contract.layout import is_remote, join, temporary_name
from core.evidence import Evidence, OwnFolder, Unproven, below
from core.local_files import dangling, open_regular

_LOG = logging.getLogger(__name__)
_AS_STORED = CompressionTypes.UNCOMPRESSED
_GLOB = re.compile(r"[*?\[]")  # where a pattern's wildcards start (Beam's pattern syntax)


def absolute(uri: str) -> str:
    """Local paths made absolute (so keys below them are stable); URIs as they are."""
    return uri if is_remote(uri) else os.path.abspath(uri)


def parent(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[0] if "/" in path.rstrip("/") else "."


def basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def split_pattern(pattern: str) -> tuple[str, str]:
    """(the folder a file pattern lists, literally, the rest of the pattern below it): the folder
    is the pattern's part before its first wildcard, up to a `/`, with each one-character class
    (`[[]`, `[*]`, `[?]`, `[1]`) read as the character it stands for."""
    literal, at = [], 0
    while at < len(pattern):
        if pattern[at] == "[" and pattern[at + 2 : at + 3] == "]":
            literal.append(pattern[at + 1])
            at += 3
        elif _GLOB.match(pattern[at]):
            break
        else:
            literal.append(pattern[at])
            at += 1
    head = "".join(literal)
    if at == len(pattern):  # no wildcard: the folder holding the one file named
        return (head.rsplit("/", 1)[0], pattern.rsplit("/", 1)[1]) if "/" in head else (".", pattern)
    folder_end = pattern.rfind("/", 0, at)
    if folder_end < 0:
        return ".", pattern
    return head[: head.rfind("/")], pattern[folder_end + 1 :]


def pattern_root(pattern: str) -> str:
    """The folder a file pattern lists (split_pattern)."""
    return split_pattern(pattern)[0]


def has_wildcard(pattern: str) -> bool:
    """Whether a file pattern holds a wildcard below its folder (split_pattern), so that it may
    match more than the one file it names."""
    return bool(_GLOB.search(split_pattern(pattern)[1]))


def has_filesystem(uri: str) -> bool:
    """Whether an installed Beam filesystem reads `uri`'s scheme (local paths: always)."""
    scheme = FileSystems.get_scheme(uri)
    return scheme is None or _reads_scheme(scheme)


@functools.cache
def _reads_scheme(scheme: str) -> bool:
    """has_filesystem for a scheme, asked of Beam once: Beam searches every FileSystem subclass
    for each path, and an image CSV asks for each row. The filesystems are those Beam imported
    with its `filesystems` module, so the answer does not change."""
    try:
        FileSystems.get_filesystem(f"{scheme}://")
    except (ValueError, BeamIOError):  # no filesystem for it, or one whose extra is not installed
        return False
    return True


def bucket_exists(name: str) -> bool:
    """False only when GCS says the bucket does not exist (an account that may not look at
    buckets gets True: the run itself then says what it cannot do)."""
    from google.api_core.exceptions import Forbidden

    try:
        return _client().bucket(name).exists()
    except Forbidden:
        return True


# --- listing: names taken literally


def stat(path: str) -> FileMetadata | None:
    """The metadata (path, size, mtime) of the file or object at `path`, or None when there is none."""
    if is_remote(path):
        blob = _blob(path).bucket.get_blob(_blob(path).name)
        return None if blob is None else _metadata(blob)
    try:
        found = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return FileMetadata(path, found.st_size, found.st_mtime)


def same_file(first: str, second: str) -> bool:
    """Whether `second` is a copy `copy` made of `first`: locally the same file (a hard link, as
    `copy` makes; a link is never followed), on GCS an object of the same size and CRC32C (a
    server-side copy or compose keeps both). False when either is missing."""
    if is_remote(first):
        blobs = [_blob(path).bucket.get_blob(_blob(path).name) for path in (first, second)]
        return None not in blobs and len({(blob.size, blob.crc32c) for blob in blobs}) == 1
    try:
        found = [os.stat(path, follow_symlinks=False) for path in (first, second)]
    except (FileNotFoundError, NotADirectoryError):
        return False
    return stat_module.S_ISREG(found[0].st_mode) and os.path.samestat(*found)


def exists(path: str) -> bool:
    """Whether a file (locally: or the file a link names) is at `path`."""
    return stat(path) is not None if is_remote(path) else os.path.exists(path)


class Unlisted(NamedTuple):
    """Something below a folder that a listing found but could not list or stat: a folder it
    cannot read, a symbolic link to a folder (not followed), a dangling link."""

    path: str  # as the OS gave it (may hold surrogate escapes on a non-UTF-8 name)
    reason: str


def list_below(folder: str, threads: int = 1) -> Iterator[FileMetadata | Unlisted]:
    """Every file below `folder`, at any depth, with what could not be listed reported as
    `Unlisted` instead of silently left out (an unreadable sub-folder, a link to a folder, a
    dangling link); gs:// has no such cases, and a failed list call raises. Locally the
    sub-folders directly below `folder` are listed `threads` at a time. On gs:// the whole prefix
    is one listing cut into name ranges listed side by side, `threads` list requests in flight
    (core.range_listing): as many requests as pages, however many folders hold the objects.
    Entries stream as they are listed, in no set order, and are never all held."""
    if is_remote(folder):
        yield from list_tree(folder, threads)
        return
    direct, folders = split_listing(folder)
    yield from direct
    yield from side_by_side(folders, list_tree, threads)


def split_listing(folder: str) -> tuple[list[FileMetadata | Unlisted], list[str]]:
    """What is directly in a local `folder` (files, and what cannot be listed), and its
    sub-folders, each to be listed by `list_tree`: where a local listing fans out."""
    if not os.path.isdir(folder):
        return [], []
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError as e:
        return [Unlisted(folder, f"cannot list this folder: {type(e).__name__}: {e.strerror or e}")], []
    direct, folders = [], []
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            folders.append(entry.path)
        elif entry.is_symlink() and os.path.isdir(entry.path):
            direct.append(Unlisted(entry.path, _LINKED_FOLDER))
        else:
            listed = _listed_file(entry.path)
            if listed is not None:
                direct.append(listed)
    return direct, folders


# What a listing asks GCS for of each object (_metadata), not the ~30 fields of each by default.
_LISTED_FIELDS = "items(name,size,updated),prefixes,nextPageToken"
_LIST_TIMEOUT = 60  # seconds, as google-cloud-storage's list_blobs
_LINKED_FOLDER = "a symbolic link to a folder: not followed (link or copy the files instead)"


def list_tree(folder: str, threads: int = 1) -> Iterator[FileMetadata | Unlisted]:
    """Every file below one folder, streamed (gs://: page by page, `threads` list requests in
    flight, in name ranges side by side)."""
    if is_remote(folder):
        yield from _entries(range_listing.list_ranges([(0, _whole(folder))], _list_page, threads, _folders_in))
        return
    failed: list[OSError] = []
    for dirpath, dirnames, filenames in os.walk(folder, onerror=failed.append):
        yield from _unlisted_folders(failed)
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                yield Unlisted(path, _LINKED_FOLDER)
        for name in filenames:
            entry = _listed_file(os.path.join(dirpath, name))
            if entry is not None:
                yield entry
    yield from _unlisted_folders(failed)


_BATCH = 1000  # entries a listing thread hands over at a time (a GCS page)


def side_by_side(folders: list[str], list_one, threads: int) -> Iterator:
    """Everything `list_one` lists in each folder, `threads` folders at a time. Threads hand over
    batches through a bounded queue, so a slow consumer holds back the listing instead of the
    listing filling memory; an error in any thread is raised here, and a consumer that stops
    early stops the threads."""
    if threads <= 1 or len(folders) <= 1:
        for folder in folders:
            yield from list_one(folder)
        return
    handed: queue.Queue = queue.Queue(maxsize=2 * threads)
    todo, taking, stop = iter(folders), threading.Lock(), threading.Event()
    done = object()

    def hand(item) -> None:
        while not stop.is_set():
            try:
                handed.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def work() -> None:
        try:
            while not stop.is_set():
                with taking:
                    folder = next(todo, None)
                if folder is None:
                    break
                batch = []
                for entry in list_one(folder):
                    batch.append(entry)
                    if len(batch) == _BATCH:
                        hand(batch)
                        batch = []
                if batch:
                    hand(batch)
        except BaseException as e:  # raised in the consumer's thread
            hand(e)
        finally:
            hand(done)

    workers = [threading.Thread(target=work, daemon=True, name="list") for _ in range(min(threads, len(folders)))]
    for worker in workers:
        worker.start()
    try:
        finished = 0
        while finished < len(workers):
            item = handed.get()
            if item is done:
                finished += 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield from item
    finally:
        stop.set()
        for worker in workers:
            worker.join()


def files_below(folder: str) -> list[str]:
    """The paths of every file below `folder` (what cannot be listed left out)."""
    return [entry.path for entry in list_below(folder) if isinstance(entry, FileMetadata)]


def list_folder(folder: str) -> Iterator[FileMetadata]:
    """The files directly in `folder` (not below its sub-folders), by literal name, streamed (a
    failed list call raises as it comes); none when it does not exist."""
    if is_remote(folder):
        yield from _entries(range_listing.list_ranges([(0, _whole(folder))], _list_page_in_folder, 1))
        return
    try:
        entries = os.scandir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return
    with entries:
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                listed = _listed_file(entry.path)
                if isinstance(listed, FileMetadata):
                    yield listed


def children(folder: str) -> list[str]:
    """The names directly below `folder`, folders included (a local folder may hold empty ones)."""
    if is_remote(folder):
        start = _split(folder.rstrip("/") + "/")[1]
        blobs, prefixes = _list_blobs(folder.rstrip("/") + "/", delimiter="/")
        return sorted({b.name[len(start) :] for b in blobs} | {p[len(start) :].rstrip("/") for p in prefixes})
    try:
        return sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []


def folder_names(folder: str) -> list[str]:
    """The names of the folders directly below `folder`, sorted: local ones (not links to folders,
    which listings do not follow), or the prefixes a gs:// listing with a delimiter shows, asked
    for without the objects beside them."""
    if is_remote(folder):
        prefix = folder.rstrip("/") + "/"
        bucket, start = _split(prefix)
        pages = _client().list_blobs(bucket, prefix=start, delimiter="/", fields="prefixes,nextPageToken")
        for _ in pages.pages:  # the iterator gathers each page's prefixes
            pass
        return sorted(p[len(start) :].rstrip("/") for p in pages.prefixes)
    try:
        entries = os.scandir(folder)
    except OSError:  # not there, or unreadable: its listing says so
        return []
    with entries:
        return sorted(entry.name for entry in entries if entry.is_dir(follow_symlinks=False))


def list_folders(folders: list[str], threads: int) -> Iterator[tuple[int, list[FileMetadata] | Exception]]:
    """(i, files directly in `folders[i]`) in batches, for every folder, listed `threads` list
    requests at a time (a large gs:// folder in name ranges side by side, as `list_below`), in no
    set order; (i, the exception) once for a folder whose listing failed, and the others go on."""
    remote = [(i, _whole(folder)) for i, folder in enumerate(folders) if is_remote(folder)]
    local = [(i, folder) for i, folder in enumerate(folders) if not is_remote(folder)]
    yield from side_by_side(local, _list_local_folder, threads)
    yield from range_listing.list_ranges(remote, _list_page_in_folder, threads)


def _list_local_folder(numbered: tuple[int, str]) -> Iterator[tuple[int, list[FileMetadata] | Exception]]:
    number, folder = numbered
    try:
        yield number, list(list_folder(folder))
    except Exception as e:  # noqa: BLE001 - the caller's to judge, as for a gs:// folder
        yield number, e


def start_listing(folder: str, pieces: int) -> tuple[list[FileMetadata], list[range_listing.NameRange]]:
    """The files on the first page of a gs:// folder's listing (every file below it, at any
    depth), and the rest of its listing cut into up to `pieces` name ranges (none when that page
    was its last), to be listed by `list_range` wherever they are sent."""
    whole = _whole(folder)
    page = _list_page(whole, None)
    if page.token is None or page.last is None:
        rest = [] if page.token is None else [whole]
        return ([] if rest else page.entries), rest
    rest = whole._replace(start=page.last)
    cut = range_listing.pieces_of(rest, page.names, 1 if page.strays else pieces, _folders_in)
    return range_listing.held_back(page, cut[0]), cut


def list_range(whole: range_listing.NameRange, threads: int) -> Iterator[FileMetadata]:
    """Every object in a name range of `start_listing`, `threads` list requests in flight."""
    yield from _entries(range_listing.list_ranges([(0, whole)], _list_page, threads, _folders_in))


def _listed_file(path: str) -> FileMetadata | Unlisted | None:
    """A local file's metadata; Unlisted when it cannot be stat'ed (a dangling link, ...); None
    when it is gone (deleted while listing: no longer input)."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        reason = dangling(path)
        return Unlisted(path, reason) if reason else None
    except OSError as e:
        return Unlisted(path, f"cannot read its size: {type(e).__name__}: {e.strerror or e}")
    return FileMetadata(path, found.st_size, found.st_mtime)


def _unlisted_folders(failed: list[OSError]) -> Iterator[Unlisted]:
    while failed:
        e = failed.pop(0)
        yield Unlisted(e.filename, f"cannot list this folder: {type(e).__name__}: {e.strerror or e}")


def list_matching(pattern: str) -> Iterator[FileMetadata | Unlisted]:
    """Every file the glob pattern matches (Beam's pattern syntax: `*`, `**`, `?`, `[...]`; a
    literal `[`, `*` or `?` is written `[[]`, `[*]`, `[?]`), listed literally below the folder
    before its first wildcard; as `Unlisted` each match that cannot be stat'ed (a dangling link,
    a link loop) and each folder the listing could not enter (unreadable, or a link to a folder)
    that could hold matches (`could_match_below`). The only path read as a pattern."""
    if pattern.endswith("/"):
        pattern += "*"
    root, rest = split_pattern(pattern)
    if not has_wildcard(pattern):  # no wildcard: the file itself
        path = join(root, rest) if root != "." or pattern.startswith("./") else rest
        entry = stat(path) if is_remote(path) else _listed_file(path)
        if entry is not None:
            yield entry
        return
    matches = re.compile(FileSystem.translate_pattern(pattern)).match
    for entry in list_below(root):
        if isinstance(entry, Unlisted) and os.path.isdir(entry.path):  # a folder it could not enter
            if could_match_below(pattern, entry.path):
                yield entry._replace(reason=entry.reason + "; it may hold files the pattern matches")
        elif matches(entry.path):
            yield entry


def could_match_below(pattern: str, folder: str) -> bool:
    """Whether files below `folder` could match the glob `pattern`, so that a folder the listing
    cannot enter is reported exactly when it could hide input, and never when it could not (no
    false errors). Compared component by component, split at `/`: each of the folder's must match
    the pattern's at the same depth, and the folder must lie above the pattern's last component
    (`root/*/x.csv`: `root/a` could, `root/a/b` could not; `root/*.csv`: `root/sub` could not). A
    component holding `**` spans folders, so from the first one on anything could. A `?` or
    `[...]` standing for a `/` (Beam's syntax allows it) is not foreseen."""
    parts, names = pattern.split("/"), folder.split("/")
    for part, name in zip(parts, names, strict=False):  # the shorter one ends the comparison
        if "**" in part:
            return True
        if not re.fullmatch(FileSystem.translate_pattern(part), name):
            return False
    return len(names) < len(parts)


# --- reading


def read_bytes(path: str, *, inside: str | None) -> bytes:
    with open_binary(path, inside=inside) as f:
        return f.read()


def read_start(path: str, size: int, *, inside: str | None) -> bytes:
    """The first `size` bytes of a file as stored (all of a shorter one): a local file only when it
    is regular (core.local_files), a gs:// object in one ranged request (Beam's reader would fetch
    its first 16 MiB)."""
    if is_remote(path):
        return _blob(path).download_as_bytes(start=0, end=size - 1, raw_download=True)
    with open_regular(path, inside=inside) as f:
        return f.read(size)


def read_text(path: str, errors: str = "strict", *, inside: str | None) -> str | None:
    """The UTF-8 text of a file, or None when there is no such file."""
    try:
        return read_bytes(path, inside=inside).decode("utf-8", errors)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except Exception:  # gs://: Beam's reader says "not found" its own ways
        if is_remote(path) and not exists(path):
            return None
        raise


def text_reader(inside: str) -> Callable[[str], str | None]:
    """read_text of files that must lie inside the folder `inside` (a dataset's, a refresh
    root's): what the dataset contract's readers take (read_manifest, folder_kind, dataset_folder)."""
    return functools.partial(read_text, inside=inside)


def open_binary(path: str, *, inside: str | None) -> BinaryIO:
    """A binary stream of the file's bytes as stored (read in chunks by the caller). A local path
    is opened by core.local_files.open_regular, `inside` the folder it must lie in (None: an
    input, read wherever its links lead): a FIFO or device would hang the reader, and a link out
    of a dataset would read what is not the dataset. gs:// has neither links nor devices."""
    if not is_remote(path):
        return open_regular(path, inside=inside)
    return FileSystems.open(path, compression_type=_AS_STORED)


def open_text(uri: str, errors: str = "strict", start: int = 0, *, inside: str | None) -> io.TextIOWrapper:
    """A UTF-8 text stream of a plain or .gz file, ready for `csv` (Beam's own decompressing
    reader is not an `io` stream, so gzip is unwrapped here), from byte `start` of a plain one."""
    raw = open_binary(uri, inside=inside)
    if is_gzip(uri):
        raw = gzip.GzipFile(fileobj=raw)
    if start:
        raw.seek(start)
    return io.TextIOWrapper(raw, encoding="utf-8", errors=errors, newline="")


def is_gzip(uri: str) -> bool:
    """Whether `open_text` unwraps GZIP from the file (by its name, as Beam tells)."""
    return CompressionTypes.detect_compression_type(uri) == CompressionTypes.GZIP


def fetch_to_temp(uri: str, suffix: str = "") -> str:
    """A local temporary copy of a (small) input file; the caller owns it."""
    handle, path = tempfile.mkstemp(suffix=suffix)
    with os.fdopen(handle, "wb") as out:
        out.write(read_bytes(uri, inside=None))
    return path


# --- writing: never through a link


def make_folder(folder: str, exist_ok: bool = False) -> None:
    """Makes a local folder whose parent exists. A run's own folder must not exist yet (a link or
    folder planted under its name is an error, never used); with `exist_ok`, a folder (never a
    link) already there is taken. gs:// has no folders."""
    if is_remote(folder):
        return
    try:
        os.mkdir(folder)
    except FileExistsError:
        if exist_ok and os.path.isdir(folder) and not os.path.islink(folder):
            return
        what = "a symbolic link" if os.path.islink(folder) else "there already"
        raise FileExistsError(errno.EEXIST, f"{what}: a run's own folder must be new", folder) from None


def create(path: str, compression: str = _AS_STORED, mime_type: str = "application/octet-stream") -> BinaryIO:
    """A stream writing a new file at `path` (GZIP-compressed when `compression` is
    CompressionTypes.GZIP), replacing a file (or link) already there, as a retried step must:
    locally the name is unlinked and created again exclusively, so a link planted there is
    removed, never written through. Its folder must exist."""
    if is_remote(path):
        return FileSystems.create(path, mime_type=mime_type, compression_type=compression)
    stream = local_writes.create_new(path)
    return stream if compression == _AS_STORED else CompressedFile(stream, compression_type=compression)


def write_bytes(path: str, data: bytes, mime_type: str = "application/octet-stream") -> None:
    """Writes a whole new file (`create`), making the folders a local path names."""
    if not is_remote(path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with create(path, mime_type=mime_type) as f:
        f.write(data)


def write_atomically(path: str, data: bytes | str) -> None:
    """Replaces the file at `path` in one step: readers see the old file or the new one. Locally
    written under a fresh random name beside it (created exclusively, never through a link),
    then renamed over it; a GCS upload is atomic by itself."""
    data = data.encode("utf-8") if isinstance(data, str) else data
    if is_remote(path):
        _blob(path).upload_from_string(data)
    else:
        local_writes.replace_atomically(path, data)


def rename(source: str, destination: str) -> None:
    """Moves one file to a new name (replacing a file or link there: a link itself, never its target)."""
    if is_remote(source):
        FileSystems.rename([source], [destination])
    else:
        os.replace(source, destination)


def copy(source: str, destination: str) -> None:
    """Replaces `destination` with `source`'s bytes in one step: locally a hard link under a fresh
    random name beside `source` (a run copies out of its own folder), renamed into place; a
    server-side copy on GCS (objects are replaced whole)."""
    if is_remote(source):
        FileSystems.copy([source], [destination])
    else:
        local_writes.link_into_place(source, destination)


# --- deleting: the one function that deletes, each path with what proves it the product's


class Changed(OSError):
    """A fenced delete (`delete` with `prove`) found an object changed since it read its generation:
    another writer is at work there."""


def delete(paths: Iterable[str], because: Evidence, prove: Callable[[], None] | None = None) -> list[str]:
    """Deletes `paths`, each covered by `because` (core.evidence: this run wrote it, a manifest names
    it, it is a run's folder, a folder this run made); raises Unproven before deleting anything when
    one is not. The only delete of anything a user can see (tests/test_deletes.py fails on another).

    A file or object is deleted (a local link as a link, never its target). A folder the evidence
    covers goes whole when `because.whole` (locally without following any link inside it; on gs://
    every object below the literal prefix of a folder it names), otherwise only once empty, deepest
    first. Nothing is
    deleted through a link: a folder that is a link, or a path below one, is reported and left
    alone. Names already gone are no error. `prove`: fences a gs:// delete behind a lease
    (pipeline.lease.Fence): each object's generation is read, `prove()` runs, and each delete is
    made on the generation read, so an object written since is never deleted (Changed). Returns
    the paths deleted."""
    paths = list(dict.fromkeys(paths))
    unproven = [path for path in paths if not because.covers(path)]
    if unproven:
        raise Unproven(f"{unproven[0]} is not {because}: not deleted (nor is any path deleted with it)")
    local = sorted((p for p in paths if not is_remote(p)), key=lambda p: p.rstrip("/").count("/"), reverse=True)
    deleted = [path for path in local if _delete_local(path, because)]
    remote = [path for path in paths if is_remote(path)]
    if remote:
        _delete_objects(remote, because, prove)
    return deleted + remote


def _delete_local(path: str, because: Evidence) -> bool:
    """One local path of `delete`; False when it is left alone (a link in a folder's place, a
    folder not empty where only an empty one may go)."""
    linked = _linked_folder_on(path, because)
    if linked is not None:
        _LOG.warning("%s is a symbolic link where a folder of a dataset or run would be: left alone", linked)
        return False
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return True
    if stat_module.S_ISDIR(mode):
        if because.whole:
            shutil.rmtree(path)
            return True
        try:
            os.rmdir(path)
        except OSError:  # not empty: what is left in it is not the evidence's
            return False
        return True
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return True


def _linked_folder_on(path: str, because: Evidence) -> str | None:
    """The first folder from the evidence's root down to `path` (a folder the evidence covers
    included) that is a symbolic link; None when there is none."""
    if because.root is None:
        return None
    relative = (below(path, because.root) or "").split("/")
    folders = [join(because.root, "/".join(relative[: i + 1])) for i in range(len(relative) - 1)]
    if because.is_folder(path):
        folders.append(path)
    return next((folder for folder in folders if os.path.islink(folder)), None)


def _delete_objects(paths: list[str], because: Evidence, prove: Callable[[], None] | None) -> None:
    """The gs:// paths of `delete`: objects, and every object below a folder that goes whole."""
    objects = []
    for path in paths:
        if because.is_folder(path):
            if because.whole:
                objects += [f"gs://{blob.bucket.name}/{blob.name}" for blob in _list_blobs(path.rstrip("/") + "/")[0]]
        else:
            objects.append(path)
    if prove is None:
        for path in objects:
            _delete_blob(path)
        return
    observed = _generations(objects)
    prove()
    for path, generation in observed.items():
        if not _delete_generation(path, generation):
            raise Changed(errno.ESTALE, "changed since it was read, by another writer", path)


def _generations(paths: list[str]) -> dict[str, str]:
    """The current generation of each gs:// object named (those that exist): what a fenced delete
    observes before it proves its lease (`_delete_generation`)."""
    found = {}
    for path in paths:
        blob = _blob(path).bucket.get_blob(_blob(path).name)
        if blob is not None:
            found[path] = str(blob.generation)
    return found


def _delete_generation(path: str, generation: str) -> bool:
    """Deletes the gs:// object if it is still at `generation`; False when it changed (or is gone)."""
    from google.api_core.exceptions import NotFound, PreconditionFailed

    try:
        _blob(path).delete(if_generation_match=int(generation), retry=_idempotent_retry())
    except PreconditionFailed:
        return False
    except NotFound:
        return True
    return True


def missing_folders(path: str) -> list[str]:
    """The folders above a local `path` that do not exist yet, nearest first: what writing it
    creates (none on GCS, which has no folders)."""
    if is_remote(path):
        return []
    missing, folder = [], os.path.dirname(os.path.abspath(path))
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    return missing


# --- conditional writes and fencing, for a lease that two processes must never both hold
#
# A lease file is created only if absent, and replaced or deleted only if nobody changed it since
# it was read (its `token`: the object generation on GCS, a hash of the bytes locally, compared
# under an flock on its folder). On GCS the lease is an empty object whose holder is in its
# metadata, so that a write of a committed name can name the lease, at the generation this run
# holds, as the first (empty) source of a compose: GCS refuses it once the lease has changed
# (`commit_copy`). Locally the same flock that guards the lease is held while committed names are
# written (`folder_lock`). Beam's FileSystems has no preconditions, so gs:// goes through
# google-cloud-storage directly.

_HOLDER_KEY = "holder"
LOCK_WAIT_SECONDS = 30.0  # how long a lease change waits for a commit in progress to end


def create_exclusive(path: str, data: bytes) -> str | None:
    """Creates the lease file with `data` if there is none; its token, or None when it already exists."""
    if is_remote(path):
        from google.api_core.exceptions import PreconditionFailed

        blob = _lease_blob(path, data)
        try:
            blob.upload_from_string(b"", if_generation_match=0)
        except PreconditionFailed:
            return None
        return str(blob.generation)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    stream = local_writes.create_exclusive(path)
    if stream is None:
        return None
    with stream:
        stream.write(data)
    return _digest(data)


def read_with_token(path: str) -> tuple[bytes, str] | None:
    """The lease file's bytes and token, or None when there is no such file. A local lease is
    opened inside its folder (core.local_files): a FIFO or a link out planted under its name is
    refused, never waited on or read."""
    if is_remote(path):
        blob = _blob(path).bucket.get_blob(_blob(path).name)
        if blob is None:
            return None
        return (blob.metadata or {}).get(_HOLDER_KEY, "").encode(), str(blob.generation)
    try:
        stream = open_regular(path, inside=os.path.dirname(os.path.abspath(path)))
    except FileNotFoundError:
        return None
    with stream:
        data = stream.read()
    return data, _digest(data)


def replace_if_unchanged(path: str, data: bytes, token: str, wait_seconds: float = LOCK_WAIT_SECONDS) -> str | None:
    """Replaces the lease file with `data` if its token is still `token`; the new token, or None.
    Locally it waits up to `wait_seconds` for a commit in progress there (folder_lock)."""
    if is_remote(path):
        from google.api_core.exceptions import NotFound, PreconditionFailed

        blob = _lease_blob(path, data)
        try:
            blob.upload_from_string(b"", if_generation_match=int(token))
        except (PreconditionFailed, NotFound):
            return None
        return str(blob.generation)
    with folder_lock(os.path.dirname(os.path.abspath(path)), wait_seconds):
        current = read_with_token(path)
        if current is None or current[1] != token:
            return None
        write_atomically(path, data)
    return _digest(data)


def delete_if_unchanged(path: str, token: str, wait_seconds: float = LOCK_WAIT_SECONDS) -> bool:
    """Deletes the lease file if its token is still `token` (waiting as replace_if_unchanged does)."""
    if is_remote(path):
        from google.api_core.exceptions import NotFound, PreconditionFailed

        try:
            _blob(path).delete(if_generation_match=int(token))
        except (PreconditionFailed, NotFound):
            return False
        return True
    with folder_lock(os.path.dirname(os.path.abspath(path)), wait_seconds):
        current = read_with_token(path)
        if current is None or current[1] != token:
            return False
        os.remove(path)
    return True


class FolderBusy(OSError):
    """Another process holds the folder's lock longer than a lease change may wait."""


@contextlib.contextmanager
def folder_lock(folder: str, wait_seconds: float = LOCK_WAIT_SECONDS):
    """An exclusive flock on a local folder, held across a read-compare-write of its lease or a
    commit into it (no lock file). Raises FolderBusy when another process keeps it longer than
    `wait_seconds` (a commit in progress, or a process stopped while committing)."""
    handle = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        deadline, waiting = time.monotonic() + wait_seconds, False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise FolderBusy(errno.EWOULDBLOCK, "another process holds its lock (a commit)", folder) from None
                if not waiting:
                    _LOG.info("waiting up to %.0f s for the commit in progress in %s", wait_seconds, folder)
                    waiting = True
                time.sleep(0.05)
        yield
    finally:
        os.close(handle)  # releases the lock


def commit_copy(source: str, destination: str, lease: tuple[str, str] | None) -> None:
    """`copy`, for a committed name: on GCS a compose whose first source is the lease object
    (`lease`: its path and the generation this run holds), so GCS refuses the write with
    PreconditionFailed once another run has taken the lease; locally the caller holds
    `folder_lock` on the lease's folder. Without a lease (an unattended run), a plain copy."""
    if not is_remote(source) or lease is None:
        copy(source, destination)
        return
    lease_path, generation = lease
    sources = [_blob(lease_path), _blob(source)]
    _blob(destination).compose(sources, if_source_generation_match=[int(generation), None], retry=_idempotent_retry())


def commit_write(path: str, data: bytes | str, lease: tuple[str, str] | None, staging: str) -> None:
    """`write_atomically`, for a committed name (`commit_copy`), by way of the run's own `staging`
    folder: locally its temporary file is written there (a write stopped halfway leaves it in the
    run's folder, not beside the dataset); on GCS the bytes go to a new object there, then are
    composed into place behind the lease."""
    if not is_remote(path):
        local_writes.replace_atomically(path, data.encode("utf-8") if isinstance(data, str) else data, staging)
        return
    if lease is None:
        write_atomically(path, data)
        return
    pending = staging.rstrip("/") + "/" + temporary_name(basename(path), os.urandom(6).hex())
    write_atomically(pending, data)
    try:
        commit_copy(pending, path, lease)
    finally:
        delete([pending], OwnFolder(staging))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- gs:// through google-cloud-storage


_THIS_THREAD = threading.local()


def _client():
    """This thread's client for the endpoint in use (STORAGE_EMULATOR_HOST, when set, as Beam's
    own client honours it): one per thread, kept, as the client's HTTP session is not meant to be
    shared between threads."""
    from google.cloud import storage as gcs

    endpoint = os.environ.get("STORAGE_EMULATOR_HOST")
    kept = getattr(_THIS_THREAD, "client", None)
    if kept is None or kept[0] != endpoint:
        kept = _THIS_THREAD.client = (endpoint, gcs.Client())
    return kept[1]


def _split(path: str) -> tuple[str, str]:
    bucket, _, name = path[len("gs://") :].partition("/")
    return bucket, name


def _blob(path: str):
    bucket, name = _split(path)
    return _client().bucket(bucket).blob(name)


def _lease_blob(path: str, data: bytes):
    blob = _blob(path)
    blob.metadata = {_HOLDER_KEY: data.decode()}
    return blob


def _list_blobs(prefix: str, delimiter: str | None = None) -> tuple[list, set[str]]:
    """The objects whose names start with `prefix` (literally: no pattern), and with a delimiter
    the "folders" below it (their prefixes)."""
    bucket, name = _split(prefix)
    pages = _client().list_blobs(bucket, prefix=name, delimiter=delimiter)
    blobs = list(pages)
    return blobs, set(pages.prefixes)


def _whole(folder: str) -> range_listing.NameRange:
    """Every name below a gs:// folder, as a name range."""
    bucket, prefix = _split(folder.rstrip("/") + "/")
    return range_listing.NameRange(bucket, prefix)


def _entries(pages: Iterator[tuple[int, list | Exception]]) -> Iterator[FileMetadata]:
    """The entries of `list_ranges`' pages, raising a failed listing's exception."""
    for _, entries in pages:
        if isinstance(entries, Exception):
            raise entries
        yield from entries


def _list_page_in_folder(whole: range_listing.NameRange, token: str | None) -> range_listing.Page:
    return _list_page(whole, token, delimiter="/")


def _list_page(whole: range_listing.NameRange, token: str | None, delimiter: str | None = None) -> range_listing.Page:
    """One page of a name range's listing, as `list_blobs` asks for it (same request, timeout and
    retries) but read from the reply's JSON as it is: the client's Blob for each object costs
    more CPU than the rest of the listing. Objects outside the range (a server that ignores the
    offsets) are dropped, and the page says so."""
    from google.cloud.storage.retry import DEFAULT_RETRY

    params = {"projection": "noAcl", "prefix": whole.prefix, "fields": _LISTED_FIELDS}
    if delimiter:
        params["delimiter"] = delimiter
    if whole.start:
        params["startOffset"] = whole.start
    if whole.end is not None:
        params["endOffset"] = whole.end
    if token:
        params["pageToken"] = token
    reply = _client()._connection.api_request(
        method="GET", path=f"/b/{whole.bucket}/o", query_params=params, timeout=_LIST_TIMEOUT, retry=DEFAULT_RETRY
    )
    items, folder = reply.get("items", ()), f"gs://{whole.bucket}/"
    names = [item["name"] for item in items]
    start, end = whole.start, whole.end
    strays = bool(names) and (min(names) < start or (end is not None and max(names) >= end))
    if strays:
        items = [item for item, name in zip(items, names, strict=True) if whole.holds(name)]
        names = [item["name"] for item in items]
    parse = datetime.datetime.fromisoformat
    entries = [
        FileMetadata(folder + item["name"], int(item["size"]), parse(item["updated"]).timestamp()) for item in items
    ]
    prefixes = reply.get("prefixes", ())
    last = max(max(names, default=""), max(prefixes, default="")) or None
    return range_listing.Page(entries, names, last, reply.get("nextPageToken"), strays, tuple(prefixes))


def _folders_in(probe: range_listing.NameRange) -> range_listing.Page:
    """The first page of a delimiter listing of `probe`: the folders it shows."""
    return _list_page(probe, None, delimiter="/")


def _metadata(blob) -> FileMetadata:
    """An object's path, size and update time in UTC seconds. The time is read from the object's
    resource as GCS sent it (RFC 3339), by datetime.fromisoformat: the client's `blob.updated`
    parses it with strptime, most of a listing's CPU."""
    updated = datetime.datetime.fromisoformat(blob._properties["updated"]).timestamp()
    return FileMetadata(f"gs://{blob.bucket.name}/{blob.name}", blob.size, updated)


def _delete_blob(path: str) -> None:
    from google.api_core.exceptions import NotFound

    with contextlib.suppress(NotFound):
        _blob(path).delete(retry=_idempotent_retry())


def _idempotent_retry():
    from google.cloud.storage.retry import DEFAULT_RETRY

    return DEFAULT_RETRY
