"""A loopback GCS stand-in serving a synthetic bucket of any size, for listing benchmarks and tests.

The gcp-storage-emulator stores every object and answers a whole listing in one reply, hiding the
paging (1,000 entries a page) that makes listing a million real objects slow. This server stores
nothing: its objects are a function of their index, so a bucket of a million costs no memory, and
it pages as GCS does. Point google-cloud-storage at it with ``STORAGE_EMULATOR_HOST`` (``env``)::

    with ListStandIn(objects=100_000, folders=1_000, page_latency=0.1) as gcs:
        subprocess.run([...], env={**os.environ, **gcs.env})
        print(gcs.list_requests, gcs.max_lists_in_flight)

Object ``i`` of ``objects`` is ``<root>/class<f>/img<i>.jpg`` in bucket ``bucket``, the indexes
split into ``folders`` contiguous runs (numbers zero-padded, so names sort in index order), or
the ``i``-th of ``names`` when given (any names, sorted as GCS sorts them: by their UTF-8 bytes,
which is Python's string order); its size, generation and ``updated`` follow from ``i`` (``size``,
``updated``), its bytes too (``content``). ``change(i)`` gives one object a new version (size,
generation, ``updated``), as an overwrite would.

Answered (GET only; the bucket is read-only): the bucket (``/storage/v1/b/<bucket>``); a listing
(``/storage/v1/b/<bucket>/o``) with ``prefix``, ``delimiter`` (``prefixes``), ``startOffset``
(inclusive) and ``endOffset`` (exclusive), ``fields`` (items cut to ``items(...)``), ``maxResults``
(default and most 1,000 entries, objects and prefixes together, as GCS) and ``pageToken``; an
object's metadata (``/storage/v1/b/<bucket>/o/<name>``) and its bytes (``alt=media``, also under
``/download/``, with a ``Range``). A listing parameter that would change the answer and is not
implemented (``matchGlob``, ``softDeleted``, ...) is refused with 400 rather than ignored.

Each list page waits ``page_latency`` seconds before it is answered, counted as in flight
meanwhile; ``list_requests`` and ``max_lists_in_flight`` count them (``reset`` zeroes both).
``page_size`` pages smaller than GCS does (tests that page through a few names), and with
``takes_offsets`` False the offsets are taken and ignored, as by a server that does not implement
them (gcp-storage-emulator).
Standard library only.
"""

from __future__ import annotations

import bisect
import datetime
import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, quote, unquote, urlsplit

from tests.loopback_server import LoopbackServer

__all__ = ["ListStandIn", "PAGE_SIZE"]

PAGE_SIZE = 1000  # GCS's default and largest page
_EPOCH = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
# Listing parameters answered as if absent: they change only what is shown, or nothing here.
_IGNORED = frozenset(("projection", "fields", "prettyPrint", "userProject", "alt", "versions"))
_ANSWERED = frozenset(("prefix", "delimiter", "startOffset", "endOffset", "maxResults", "pageToken")) | _IGNORED
_ITEM_FIELDS = re.compile(r"items\(([^)]*)\)")
_QUICK_FIELDS = frozenset(("name", "size", "updated"))  # shown without making the whole resource


class ListStandIn(LoopbackServer):
    """The server, on a daemon thread; a context manager.

    Args:
      objects: how many objects the bucket holds.
      folders: how many class folders they are spread over (at most `objects`).
      names: the objects' names instead, sorted (then `objects` and `folders` are left out).
      bucket: the bucket's name; root: the folder the class folders are in.
      page_latency: seconds each list page waits before it is answered.
    """

    def __init__(
        self,
        objects: int = 0,
        folders: int = 1,
        *,
        names: list[str] | None = None,
        bucket: str = "bench",
        root: str = "images",
        page_latency: float = 0.0,
        host: str = "127.0.0.1",
    ) -> None:
        if names is not None:
            objects = len(_checked(names))
        if not 1 <= folders <= max(objects, 1):
            raise ValueError(f"folders must be from 1 to objects ({objects}), got {folders}")
        self.objects, self.folders, self.bucket, self.root = objects, folders, bucket, root.strip("/")
        self._names = names
        super().__init__(_Handler, host, "gcs-list-stand-in")
        self.page_latency = page_latency
        self.page_size = PAGE_SIZE
        self.takes_offsets = True
        self._folder_digits = max(4, len(str(folders - 1)))
        self._index_digits = max(7, len(str(max(objects - 1, 0))))
        self._versions: dict[int, int] = {}  # index -> times changed
        self._lock = threading.Lock()
        self._in_flight = 0
        self.list_requests = 0
        self.max_lists_in_flight = 0

    @property
    def env(self) -> dict[str, str]:
        """What a (sub)process needs to send its google-cloud-storage requests here (anonymously,
        as that client is with STORAGE_EMULATOR_HOST set), past any HTTP proxy."""
        env = {"STORAGE_EMULATOR_HOST": self.url}
        for var in ("NO_PROXY", "no_proxy"):
            hosts = [host for host in os.environ.get(var, "").split(",") if host]
            env[var] = ",".join(hosts if self.host in hosts else [*hosts, self.host])
        return env

    # -- the synthetic bucket -----------------------------------------------

    def name(self, index: int) -> str:
        if self._names is not None:
            return self._names[index]
        folder = index * self.folders // self.objects
        return f"{self.root}/class{folder:0{self._folder_digits}d}/img{index:0{self._index_digits}d}.jpg"

    def uri(self, index: int) -> str:
        return f"gs://{self.bucket}/{self.name(index)}"

    def size(self, index: int) -> int:
        """20 to 120 kB, spread by a multiplicative hash; one byte more per change."""
        return 20_000 + (index * 2_654_435_761) % 100_000 + self._versions.get(index, 0)

    def updated(self, index: int) -> datetime.datetime:
        """A second apart per index, with milliseconds; a day later per change."""
        shift = datetime.timedelta(seconds=index, milliseconds=index % 1000, days=self._versions.get(index, 0))
        return _EPOCH + shift

    def content(self, index: int) -> bytes:
        """The object's bytes: its name repeated, cut to its size."""
        line = (self.name(index) + "\n").encode()
        size = self.size(index)
        return (line * (size // len(line) + 1))[:size]

    def change(self, index: int) -> None:
        """A new version of object `index`, as an overwrite makes."""
        with self._lock:
            self._versions[index] = self._versions.get(index, 0) + 1

    def serve(self, names: list[str]) -> None:
        """Serves these objects from now on, in place of those before (sorted names, as `names`)."""
        with self._lock:
            self._names, self.objects, self._versions = _checked(names), len(names), {}

    def reset(self) -> None:
        """Zeroes the list counters (between benchmark runs)."""
        with self._lock:
            self.list_requests = self.max_lists_in_flight = 0

    def index_of(self, name: str) -> int | None:
        at = self._first_at_or_after(name)
        return at if at < self.objects and self.name(at) == name else None

    def _first_at_or_after(self, name: str) -> int:
        return bisect.bisect_left(range(self.objects), name, key=self.name)

    def _after_prefix(self, prefix: str) -> int:
        """The first index whose name does not start with `prefix`, counting from those that do."""
        return bisect.bisect_right(range(self.objects), prefix, key=lambda i: self.name(i)[: len(prefix)])

    def _updated_text(self, index: int) -> str:
        return self.updated(index).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def item(self, index: int, fields: frozenset[str] | None) -> dict:
        """The object as a listing shows it: its resource, or of it the `fields` named."""
        if fields is None or not fields <= _QUICK_FIELDS:
            whole = self.resource(index)
            return whole if fields is None else {k: v for k, v in whole.items() if k in fields}
        shown = {}
        if "name" in fields:
            shown["name"] = self.name(index)
        if "size" in fields:
            shown["size"] = str(self.size(index))
        if "updated" in fields:
            shown["updated"] = self._updated_text(index)
        return shown

    def resource(self, index: int) -> dict:
        """The object's JSON resource, as GCS lists and stats it (no hashes: they would need its bytes)."""
        name, version = self.name(index), self._versions.get(index, 0)
        generation = str(1_735_689_600_000_000 + index * 1_000 + version)
        updated = self._updated_text(index)
        quoted = quote(name, safe="")
        return {
            "kind": "storage#object",
            "id": f"{self.bucket}/{name}/{generation}",
            "selfLink": f"{self.url}/storage/v1/b/{self.bucket}/o/{quoted}",
            "mediaLink": f"{self.url}/download/storage/v1/b/{self.bucket}/o/{quoted}?generation={generation}&alt=media",
            "name": name,
            "bucket": self.bucket,
            "generation": generation,
            "metageneration": "1",
            "contentType": "image/jpeg",
            "storageClass": "STANDARD",
            "size": str(self.size(index)),
            "etag": f"CL{generation}",
            "timeCreated": updated,
            "updated": updated,
            "timeStorageClassUpdated": updated,
        }

    def page(
        self,
        prefix: str,
        delimiter: str,
        start: int,
        limit: int,
        offsets: tuple[str, str | None] = ("", None),
        fields: frozenset[str] | None = None,
    ) -> dict:
        """One page of a listing from index `start` on: objects and (with a delimiter) the
        prefixes they roll up into, `limit` entries at most, of the names from `offsets`' first
        (inclusive) to its second (exclusive; None: no end); a prefix is listed once a page, and
        the next page starts after all of its objects. `fields`: those of each object shown."""
        low, high = offsets
        at = max(start, self._first_at_or_after(prefix), self._first_at_or_after(low))
        end = self._after_prefix(prefix)
        if high is not None:
            end = min(end, self._first_at_or_after(high))
        items, prefixes = [], []
        while at < end and len(items) + len(prefixes) < limit:
            name = self.name(at)
            cut = name.find(delimiter, len(prefix)) if delimiter else -1
            if cut < 0:
                items.append(self.item(at, fields))
                at += 1
            else:
                prefixes.append(name[: cut + len(delimiter)])
                at = max(at + 1, self._after_prefix(prefixes[-1]))
        reply: dict = {"kind": "storage#objects"}
        if at < end:
            reply["nextPageToken"] = str(at)
        if prefixes:
            reply["prefixes"] = prefixes
        if items:
            reply["items"] = items
        return reply

    def _listing(self, query: dict[str, list[str]]) -> tuple[int, dict]:
        """(status, body) of a list request; counted, and held `page_latency` seconds."""
        with self._lock:
            self.list_requests += 1
            self._in_flight += 1
            self.max_lists_in_flight = max(self.max_lists_in_flight, self._in_flight)
        try:
            time.sleep(self.page_latency)
            unknown = sorted(set(query) - _ANSWERED)
            if unknown:
                return 400, _error(400, f"the stand-in does not implement {', '.join(unknown)}")
            given = {key: values[-1] for key, values in query.items()}
            try:
                start = int(given.get("pageToken", "0"))
                limit = min(int(given.get("maxResults", PAGE_SIZE)), self.page_size)
            except ValueError:
                return 400, _error(400, "invalid pageToken or maxResults")
            if limit < 1 or start < 0:
                return 400, _error(400, "invalid pageToken or maxResults")
            offsets = (
                (given.get("startOffset", ""), given.get("endOffset") or None) if self.takes_offsets else ("", None)
            )
            reply = self.page(
                given.get("prefix", ""), given.get("delimiter", ""), start, limit, offsets, _fields(given)
            )
            return 200, reply
        finally:
            with self._lock:
                self._in_flight -= 1

    def _bucket(self) -> dict:
        created = _EPOCH.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return {
            "kind": "storage#bucket",
            "id": self.bucket,
            "name": self.bucket,
            "location": "US-CENTRAL1",
            "storageClass": "STANDARD",
            "metageneration": "1",
            "timeCreated": created,
            "updated": created,
        }


def _checked(names: list[str]) -> list[str]:
    if names != sorted(set(names)):
        raise ValueError("names must be sorted and each given once")
    return list(names)


def _fields(given: dict[str, str]) -> frozenset[str] | None:
    """The fields of each item a `fields` parameter's `items(a,b,...)` names, as GCS cuts items
    to them (the reply's other parts are sent whole); None: every field."""
    named = _ITEM_FIELDS.search(given.get("fields", ""))
    return frozenset(name.strip() for name in named.group(1).split(",")) if named else None


def _error(code: int, message: str) -> dict:
    return {"error": {"code": code, "message": message, "errors": [{"message": message, "reason": "invalid"}]}}


class _Handler(BaseHTTPRequestHandler):
    """One client connection: HTTP/1.1 with keep-alive, as google-cloud-storage's pool expects."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # a reply's headers and body go out in two writes: no 40 ms ACK wait
    timeout = 120  # an idle keep-alive connection's thread ends eventually

    def log_message(self, format, *args) -> None:
        pass

    def do_GET(self) -> None:
        gcs: ListStandIn = self.server.owner
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        parts = url.path.removeprefix("/download").split("/")  # '', storage, v1, b, bucket[, o[, name]]
        if parts[1:4] != ["storage", "v1", "b"] or len(parts) < 5 or len(parts) > 7:
            self._json(404, _error(404, f"not a path of the stand-in: {url.path}"))
        elif unquote(parts[4]) != gcs.bucket:
            self._json(404, _error(404, "The specified bucket does not exist."))
        elif len(parts) == 5:
            self._json(200, gcs._bucket())
        elif parts[5] != "o":
            self._json(404, _error(404, f"not a path of the stand-in: {url.path}"))
        elif len(parts) == 6:
            self._json(*gcs._listing(query))
        else:
            index = gcs.index_of(unquote(parts[6]))
            if index is None:
                self._json(404, _error(404, "No such object: " + f"{gcs.bucket}/{unquote(parts[6])}"))
            elif query.get("alt") == ["media"]:
                self._media(gcs.content(index))
            else:
                self._json(200, gcs.resource(index))

    def _refuse(self) -> None:
        self.close_connection = True  # its body is not read
        self._json(405, _error(405, "the stand-in's bucket is read-only"))

    do_POST = do_PUT = do_PATCH = do_DELETE = _refuse

    def _json(self, status: int, body: dict) -> None:
        self._send(status, "application/json; charset=UTF-8", json.dumps(body).encode())

    def _media(self, data: bytes) -> None:
        """The bytes, or the part a `Range: bytes=a-[b]` asks for (206)."""
        wanted = self.headers.get("Range", "")
        if not wanted.startswith("bytes="):
            self._send(200, "image/jpeg", data)
            return
        first, _, last = wanted[len("bytes=") :].partition("-")
        start, end = int(first), min(int(last) if last else len(data) - 1, len(data) - 1)
        if start >= len(data):
            self._send(416, "application/json; charset=UTF-8", json.dumps(_error(416, "range")).encode())
            return
        self._send(206, "image/jpeg", data[start : end + 1], [("Content-Range", f"bytes {start}-{end}/{len(data)}")])

    def _send(self, status: int, content_type: str, payload: bytes, headers=()) -> None:
        self.send_response_only(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)
