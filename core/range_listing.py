"""Listing one gs:// prefix with many list requests in flight, as a splittable read splits its input.

GCS answers a listing one page (1,000 names) at a time, each page asked for with the previous
one's token, so one prefix alone is a serial chain of requests. A listing also takes a range of
names (objects.list `startOffset`, inclusive, and `endOffset`, exclusive), and names are sorted by
their UTF-8 bytes, which is the order of their code points, Python's string order. So the listing
of a prefix is split into half-open `NameRange`s: a range is listed page by page, and when a page
comes back full while listing threads wait for work, the rest of the range, from the page's last
name on, is cut into pieces (`pieces_of`) that the threads list side by side, and split again
in turn. No range needs to know how the names are spread: every range is listed until it ends,
so each name is listed exactly once whatever the cuts; good cuts only spread the work better.

Where a page's names lay in a few folders, one delimiter listing shows the folders beside them,
and the rest is cut where folders start (`folder_points`): no piece between two folders is empty,
and an empty piece costs a request and a page's wait. Otherwise, or within the rest of one
folder: an open-ended range (to the prefix's end) is cut at points growing away from its last
name (its name with one digit raised, from the last one that varied on the page towards the
prefix): like an exponential search, some of them cut off most of what follows, however far it
goes. A range with an end is cut evenly between its last name and its end, counting each
character by its rank among the characters its page showed (digits, hex, words), so that names
of ten digits are cut into tenths, not into the byte values no name uses, and into about two
pieces for each page that the names would fill as densely as the page held them.

Entries stream in no set order. A server that ignores the offsets (the emulator) answers each
range with more than it holds: what lies outside a range is dropped, and such a listing is not
split again.
"""

from __future__ import annotations

import bisect
import collections
import logging
import math
import os
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

_LOG = logging.getLogger(__name__)
MAX_NAME_BYTES = 1024  # GCS's longest object name: no cut point is longer
_POSITIONS = 16  # characters past the names' shared start that an even cut works out
# A page whose names lie in more folders than this shows how folder names vary, which split_points
# cuts by; one in fewer does not, and the folders beside them are asked for (_cut_points).
_FOLDERS_SHOWN = 4


class NameRange(NamedTuple):
    """The names in `bucket` that start with `prefix`, from `start` (inclusive; "" for the
    prefix's first) to `end` (exclusive; None for the prefix's last): picklable, so that a job
    can make one an element."""

    bucket: str
    prefix: str
    start: str = ""
    end: str | None = None

    def holds(self, name: str) -> bool:
        return self.start <= name and (self.end is None or name < self.end)


class Page(NamedTuple):
    """One page of a range's listing: its entries and their names (sorted, one each), the page's
    last name (an entry's, or with a delimiter a prefix's; None when it is empty), and the token of
    the next page (None: the last)."""

    entries: list
    names: list[str]
    last: str | None
    token: str | None
    strays: bool = False  # it held names outside the range asked for (the offsets were ignored)
    folders: tuple[str, ...] = ()  # with a delimiter: the folders ("<prefix>.../") it rolled names up into


ListPage = Callable[[NameRange, "str | None"], Page]
ListFolders = Callable[[NameRange], Page]  # the first page of a delimiter listing of a range


def _next_char(c: str) -> str | None:
    """The code point after `c` that a UTF-8 name can hold (no surrogates), or None."""
    after = ord(c) + 1
    if 0xD800 <= after <= 0xDFFF:
        after = 0xE000
    return chr(after) if after <= 0x10FFFF else None


def _fits(name: str) -> bool:
    return len(name.encode("utf-8")) <= MAX_NAME_BYTES


def split_points(rest: NameRange, names: Sequence[str], pieces: int) -> list[str]:
    """Up to `pieces - 1` names that cut `rest` (a range whose start is the last name a page
    listed) into pieces, sorted, each strictly inside `rest`; `names`: the page's names, sorted,
    which show how names vary. None when `rest` has no room for a cut."""
    last, prefix = rest.start, rest.prefix
    if pieces < 2 or (rest.end is not None and rest.end <= last):
        return []
    names = names or [last]
    if rest.end is None:
        varied = len(os.path.commonprefix([names[0], last]))
        points = _away_from(last, varied, len(prefix))[: pieces - 1]
        top = points[-1] if points else last
        beyond = _next_char(max(_alphabet(names, "", varied) or [last[-1:] or "/"]))
        if len(points) < pieces - 1 and beyond and top < prefix + beyond:  # and up to the names' last character
            end = prefix + beyond
            shared = len(os.path.commonprefix([top, end]))
            alphabet = _alphabet([*names, top], end, shared)
            points += _between(top, end, shared, alphabet, pieces - len(points), (names[0], last))
    else:
        shared = len(os.path.commonprefix([last, rest.end]))
        alphabet = _alphabet([*names, last], rest.end, shared)
        points = _between(last, rest.end, shared, alphabet, pieces, (names[0], last))
    kept, below = [], last
    for point in points:
        if below < point and rest.holds(point) and point.startswith(prefix) and _fits(point):
            kept.append(_shortest(point, below, len(prefix)))
            below = kept[-1]
    return kept[: pieces - 1]


def _shortest(point: str, below: str, floor: int) -> str:
    """The shortest start of `point` (past its first `floor` characters) still after `below`."""
    for length in range(floor + 1, len(point)):
        if point[:length] > below:
            return point[:length]
    return point


def _away_from(last: str, varied: int, floor: int) -> list[str]:
    """`last` with one digit raised, from the character before those that varied on its page
    (`varied`: how many characters the page's names shared) down to the first past the prefix
    (`floor`): cut points ever farther from `last`. Only digits: numbers count on past a page,
    while the letters every name on it shared are a word the names after it likely share too
    (`img`: a cut at `imh` or `in` holds nothing)."""
    points = []
    for at in range(min(varied, len(last)) - 1, floor - 1, -1):
        raised = _next_char(last[at]) if last[at].isdigit() else None
        if raised is not None:
            points.append(last[:at] + raised)
    return points


def _alphabet(names: Sequence[str], end: str, shared: int) -> list[str]:
    """The characters that vary in the page's names (past their first `shared`, the start every
    name of the range has, and before the end they all share, such as `.jpg`) and the range's
    end's, sorted."""
    same_end = len(os.path.commonprefix([name[::-1] for name in names])) if len(names) > 1 else 0
    chars = set(end[shared:])
    for name in names:
        chars.update(name[shared : len(name) - same_end])
    return sorted(chars)


def _between(low: str, high: str, shared: int, alphabet: list[str], pieces: int, page: tuple[str, str]) -> list[str]:
    """Points evenly spaced between `low` and `high` when each character past their first `shared`
    (the same in both) counts as its rank in `alphabet` (one more digit than it has: the rank
    past its last); about two pieces for each page that many names would fill, as densely as
    `page` (its first and last name) held them, where it shows that, so that the rest of a
    folder is not cut into pieces of a few names each."""
    base = len(alphabet) + 1
    width = min(max(len(low), len(high)) - shared + 1, _POSITIONS)

    def value(text: str) -> int:
        digits = [bisect.bisect_left(alphabet, c) for c in text[shared : shared + width]]
        digits += [0] * (width - len(digits))
        number = 0
        for digit in digits:
            number = number * base + digit
        return number

    start, stop = value(low), value(high)
    first, last = page
    if first[:shared] == high[:shared] and last[:shared] == high[:shared] and value(last) > value(first):
        pages_left = (stop - start) / (value(last) - value(first))
        pieces = min(pieces, max(1, math.ceil(2 * pages_left)))
    points = []
    for piece in range(1, pieces):
        number = start + (stop - start) * piece // pieces
        chars = []
        for _ in range(width):
            number, digit = divmod(number, base)
            chars.append(alphabet[digit] if digit < len(alphabet) else _next_char(alphabet[-1]) or alphabet[-1])
        points.append(high[:shared] + "".join(reversed(chars)).rstrip(alphabet[0]))
    return points


def sibling_folders(rest: NameRange) -> NameRange:
    """`rest` as a delimiter listing asks for it to show the folders beside the one its start is
    in (those of the folder above it, within the range's prefix)."""
    folder_end = rest.start.rfind("/", len(rest.prefix))
    above_end = rest.start.rfind("/", len(rest.prefix), max(folder_end, 0))
    return rest._replace(prefix=rest.start[: above_end + 1] if above_end >= 0 else rest.prefix)


def _folder_of(name: str, probe: NameRange) -> str:
    """The folder of `probe`'s that holds `name` ("" when it is directly in `probe.prefix`)."""
    return name[: name.find("/", len(probe.prefix)) + 1]


def _inside(rest: NameRange, folders: Sequence[str]) -> list[str]:
    """The folders that start inside `rest`, past its start: where it may be cut."""
    return [folder for folder in folders if folder > rest.start and rest.holds(folder) and _fits(folder)]


def folder_points(rest: NameRange, folders: Sequence[str], pieces: int, per_page: int) -> list[str]:
    """Up to `pieces - 1` of `folders` (prefixes ending in "/", sorted) that cut `rest` where a
    folder starts, as evenly by the count of folders as they allow, about two pieces for each
    page that `per_page` folders fill; none when no folder starts inside `rest`."""
    inside = _inside(rest, folders)
    count = len(inside) + 1  # and the folder `rest` starts in
    pieces = min(pieces, max(2, math.ceil(2 * count / per_page)))
    chosen = {inside[max(k * count // pieces - 1, 0)] for k in range(1, pieces)} if inside else set()
    return sorted(chosen)


def pieces_of(
    rest: NameRange, names: Sequence[str], pieces: int, list_folders: ListFolders | None = None
) -> list[NameRange]:
    """`rest` cut into consecutive ranges that together are `rest` (just `rest` when it has no
    room for a cut), at `_cut_points`."""
    cuts = [rest.start, *_cut_points(rest, names, pieces, list_folders), rest.end]
    return [rest._replace(start=start, end=end) for start, end in zip(cuts, cuts[1:], strict=False)]


def _cut_points(rest: NameRange, names: Sequence[str], pieces: int, list_folders: ListFolders | None) -> list[str]:
    """Where to cut `rest` into `pieces`. Where `list_folders` shows folders beside the one it
    starts in (one more request), where they start: a cut between folders is never an empty
    range, and an empty range wastes a request. When it shows none, the rest of that folder is
    cut as a range of its own (split_points), not the names past it. Else at split_points."""
    if pieces < 2:
        return []
    if not list_folders:
        return split_points(rest, names, pieces)
    probe = sibling_folders(rest)
    spanned = len({_folder_of(name, probe) for name in names}) or 1  # folders the page reached into
    if spanned > _FOLDERS_SHOWN:
        return split_points(rest, names, pieces)
    points = folder_points(rest, list_folders(probe).folders, pieces, spanned)
    folder = _folder_of(rest.start, probe)
    if points or not folder or (rest.end is not None and rest.end.startswith(folder)):
        return points or split_points(rest, names, pieces)
    return split_points(
        rest._replace(prefix=folder, end=None), [name for name in names if name.startswith(folder)], pieces
    )


def held_back(page: Page, rest: NameRange) -> list:
    """A page's entries listed before `rest`, which starts at the page's last name and so lists
    that name's entry again."""
    return page.entries[:-1] if page.names and page.names[-1] == rest.start else page.entries


_BATCH_QUEUE = 2  # batches a listing thread may have waiting for the consumer


def list_ranges(
    ranges: Sequence[tuple[int, NameRange]], list_page: ListPage, threads: int, list_folders: ListFolders | None = None
) -> Iterator[tuple[int, list | Exception]]:
    """(key, a page's entries) for every page of every range given as (key, range), listed
    `threads` requests at a time, each range split while threads wait (pieces_of, with
    `list_folders`), in no set order. A failed listing gives (key, the exception) for its range (or the piece of it that
    failed), and the others go on.
    Threads hand pages over through a bounded queue, so a slow consumer holds back the listing;
    a consumer that stops early stops the threads."""
    if threads <= 1:
        for key, whole in ranges:
            try:
                yield from ((key, entries) for entries in _serially(whole, list_page))
            except Exception as e:  # noqa: BLE001 - handed to the caller, as the threads do
                yield key, e
        return
    yield from _Lister(ranges, list_page, threads, list_folders).run()


def _serially(whole: NameRange, list_page: ListPage) -> Iterator[list]:
    token = None
    while True:
        page = list_page(whole, token)
        yield page.entries
        token = page.token
        if token is None:
            return


class _Lister:
    """The threads of one `list_ranges`: ranges waiting to be listed, how many threads wait for
    one, and the pages handed over."""

    def __init__(self, ranges, list_page: ListPage, threads: int, list_folders: ListFolders | None) -> None:
        self._todo = collections.deque((key, whole, None) for key, whole in ranges)
        self._list_page, self._list_folders, self._threads = list_page, list_folders, threads
        self._bare: dict[str, tuple[str, str | None]] = {}  # per probed prefix: a range shown to hold no folder
        self._changed = threading.Condition()
        self._busy = self._waiting = 0
        self._split = True
        self._stop = threading.Event()
        self._handed: queue.Queue = queue.Queue(maxsize=_BATCH_QUEUE * threads)
        self._done = object()

    def run(self) -> Iterator[tuple[int, list | Exception]]:
        workers = [threading.Thread(target=self._work, daemon=True, name="list") for _ in range(self._threads)]
        for worker in workers:
            worker.start()
        try:
            finished = 0
            while finished < len(workers):
                item = self._handed.get()
                if item is self._done:
                    finished += 1
                else:
                    yield item
        finally:
            self._stop.set()
            with self._changed:
                self._changed.notify_all()
            for worker in workers:
                worker.join()

    def _hand(self, item) -> None:
        while not self._stop.is_set():
            try:
                self._handed.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _take(self):
        """The next range to list, waiting while other threads may still cut one off; None once
        every range is listed (or the consumer stopped)."""
        with self._changed:
            while not self._todo and self._busy and not self._stop.is_set():
                self._waiting += 1
                self._changed.wait()
                self._waiting -= 1
            if self._stop.is_set() or not self._todo:
                self._changed.notify_all()
                return None
            self._busy += 1
            return self._todo.popleft()

    def _work(self) -> None:
        try:
            while (item := self._take()) is not None:
                key = item[0]
                try:
                    self._list(*item)
                except Exception as e:  # noqa: BLE001 - raised or reported by the consumer
                    self._hand((key, e))
                finally:
                    with self._changed:
                        self._busy -= 1
                        self._changed.notify_all()
        finally:
            self._hand(self._done)

    def _list(self, key: int, current: NameRange, token: str | None) -> None:
        while not self._stop.is_set():
            page = self._list_page(current, token)
            if page.strays and self._split:
                self._split = False
                _LOG.info("gs://%s does not take name ranges: listing its folders one request each", current.bucket)
            if page.token is None:
                self._hand((key, page.entries))
                return
            pieces = self._pieces(current._replace(start=page.last), page.names) if page.last else []
            if len(pieces) < 2:
                self._hand((key, page.entries))
                token = page.token
                continue
            self._hand((key, held_back(page, pieces[0])))
            with self._changed:
                self._todo.extend((key, piece, None) for piece in pieces[1:])
                self._changed.notify_all()
            current, token = pieces[0], None

    def _pieces(self, rest: NameRange, names: list[str]) -> list[NameRange]:
        """The rest of a range cut for the threads that wait (none wait: not cut)."""
        with self._changed:
            wanted = self._waiting - len(self._todo)
        if not self._split or wanted < 1:
            return [rest]
        return pieces_of(rest, names, wanted + 1, self._list_folders and self._folders)

    def _folders(self, probe: NameRange) -> Page:
        """`list_folders`, asked again for a folder only where it may show more: a range whose
        whole delimiter listing held no folder holds none past any later start (a flat folder,
        which every cut of its listing would otherwise probe)."""
        bare = self._bare.get(probe.prefix)
        if bare and bare[0] <= probe.start and (bare[1] is None or (probe.end is not None and probe.end <= bare[1])):
            return Page([], [], None, None)
        page = self._list_folders(probe)
        if page.token is None and not _inside(probe, page.folders):
            self._bare[probe.prefix] = (probe.start, probe.end)
        return page
