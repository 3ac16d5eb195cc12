"""Listing one gs:// prefix with many list requests in flight, as a splittable read splits its input.

GCS answers a listing one page (1,000 names) at a time, each page asked for with the previous
one's token, so one prefix alone is a serial chain of requests. A listing also takes a range of
names (objects.list `startOffset`, inclusive, and `endOffset`, exclusive), and names are sorted by
their UTF-8 bytes, which is the order of their code points, Python's string order. So the listing
of a prefix is split into half-open `NameRange`s: a range is listed page by page, and when a page
comes back full while listing threads wait for work, the rest of the range, from the page's last
name on, is cut into pieces (`split_points`) that the threads list side by side, and split again
in turn. No range needs to know how the names are spread: every range is listed until it ends,
so each name is listed exactly once whatever the cuts; good cuts only spread the work better.

An open-ended range (to the prefix's end) is cut at points growing away from its last name (its
name with one character raised, from the last character that varied on the page towards the
prefix): like an exponential search, some of them cut off most of what follows, however far it
goes. A range with an end is cut evenly between its last name and its end, counting each
character by its rank among the characters its page showed (digits, hex, words), so that names
of ten digits are cut into tenths, not into the byte values no name uses.

Entries stream in no set order. A server that ignores the offsets (the emulator) answers each
range with more than it holds: what lies outside a range is dropped, and such a listing is not
split again.
"""

from __future__ import annotations

import bisect
import collections
import logging
import os
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

_LOG = logging.getLogger(__name__)
MAX_NAME_BYTES = 1024  # GCS's longest object name: no cut point is longer
_POSITIONS = 16  # characters past the names' shared start that an even cut works out


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


ListPage = Callable[[NameRange, "str | None"], Page]


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
            points += _between(top, end, shared, _alphabet([*names, top], end, shared), pieces - len(points))
    else:
        shared = len(os.path.commonprefix([last, rest.end]))
        points = _between(last, rest.end, shared, _alphabet([*names, last], rest.end, shared), pieces)
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
    """`last` with one character raised, from the character before those that varied on its page
    (`varied`: how many characters the page's names shared) down to the first past the prefix
    (`floor`): cut points ever farther from `last`."""
    points = []
    for at in range(min(varied, len(last)) - 1, floor - 1, -1):
        raised = _next_char(last[at])
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


def _between(low: str, high: str, shared: int, alphabet: list[str], pieces: int) -> list[str]:
    """Points evenly spaced between `low` and `high` when each character past their first `shared`
    (the same in both) counts as its rank in `alphabet` (one more digit than it has: the rank
    past its last)."""
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
    points = []
    for piece in range(1, pieces):
        number = start + (stop - start) * piece // pieces
        chars = []
        for _ in range(width):
            number, digit = divmod(number, base)
            chars.append(alphabet[digit] if digit < len(alphabet) else _next_char(alphabet[-1]) or alphabet[-1])
        points.append(high[:shared] + "".join(reversed(chars)).rstrip(alphabet[0]))
    return points


def pieces_of(rest: NameRange, names: Sequence[str], pieces: int) -> list[NameRange]:
    """`rest` cut at its split_points: consecutive ranges that together are `rest` (just `rest`
    when it has no room for a cut)."""
    cuts = [rest.start, *split_points(rest, names, pieces), rest.end]
    return [rest._replace(start=start, end=end) for start, end in zip(cuts, cuts[1:], strict=False)]


def held_back(page: Page, rest: NameRange) -> list:
    """A page's entries listed before `rest`, which starts at the page's last name and so lists
    that name's entry again."""
    return page.entries[:-1] if page.names and page.names[-1] == rest.start else page.entries


_BATCH_QUEUE = 2  # batches a listing thread may have waiting for the consumer


def list_ranges(
    ranges: Sequence[tuple[int, NameRange]], list_page: ListPage, threads: int
) -> Iterator[tuple[int, list | Exception]]:
    """(key, a page's entries) for every page of every range given as (key, range), listed
    `threads` requests at a time, each range split while threads wait (split_points), in no set
    order. A failed listing gives (key, the exception) for its range (or the piece of it that
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
    yield from _Lister(ranges, list_page, threads).run()


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

    def __init__(self, ranges, list_page: ListPage, threads: int) -> None:
        self._todo = collections.deque((key, whole, None) for key, whole in ranges)
        self._list_page, self._threads = list_page, threads
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
        return pieces_of(rest, names, wanted + 1)
