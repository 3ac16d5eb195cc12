"""A loopback HTTP proxy that makes a GCS emulator misbehave, for retry regression tests.

Put it between a client and ``GcsEmulator`` (``STORAGE_EMULATOR_HOST=proxy.url``)::

    with GcsEmulator() as emu, FaultProxy(emu.url, seed=7) as proxy:
        subprocess.run([...], env={**os.environ, **emu.env, "STORAGE_EMULATOR_HOST": proxy.url})
        assert all(proxy.counts.values())

Every request is forwarded unchanged (method, target, headers, body; ``Host`` too, because the
emulator builds resumable-upload ``Location`` and ``mediaLink`` URLs from it, so follow-up requests
come back through the proxy), and so is every reply, except that the emulator's own address in
JSON and batch replies is replaced by the proxy's (see ``_own_links``). Some requests instead get a
fault, the ways real GCS fails:

* ``503`` / ``429``: an error reply (``Retry-After: 0``) without forwarding: the request never
  happened, so a retry is always correct.
* ``drop``: the connection is closed without a reply, also without forwarding.
* ``truncate``: the request is forwarded, then the reply goes out with its full ``Content-Length``
  but only half its body before the connection closes. For a write, the write has happened: the
  client's retry must be idempotent (GCS clients' are). A reply with under 2 body bytes cannot be
  truncated: it goes out whole and the fault is withdrawn.

With ``preconditions=True`` the proxy also enforces what the emulator ignores: a request's
``ifGenerationMatch`` (uploads, deletes, a compose's destination) and each compose source's
``objectPreconditions.ifGenerationMatch`` are checked against the object's current generation
(asked of the emulator) and answered ``412 conditionNotMet`` when they differ, as GCS does.
Requests with preconditions are checked and forwarded one at a time.

Faults are bounded so a correct client always finishes: at most ``max_faults`` in all, only during
the first ``window_s`` seconds after the first request, and never on two consecutive attempts of
the same request (method + target), so its retry goes through. Whether a request is faulted
depends only on the seed, the request (less what changes from run to run: the emulator's
time-stamped ids, Beam's UUIDs) and how many times it was seen before, so a rerun with the same
seed faults the same requests (while the budget lasts; concurrent identical requests, such as
bucket look-ups, may trade places). The kinds go round in turn among the faulted requests, so a
handful of faults exercises every kind, whatever the seed. Standard library only.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, quote, unquote, urlsplit

from tests.loopback_server import LoopbackServer

__all__ = ["FAULT_KINDS", "FaultProxy"]

FAULT_KINDS = ("503", "429", "drop", "truncate")
# Connection-level headers that describe one hop, not the message (RFC 9110 7.6.1); bodies are
# re-framed with Content-Length.
_HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "Proxy-Connection",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
        "Content-Length",
    )
)
# What differs between two runs of the same job, left out of the hash so they fault the same
# requests: query values the emulator makes from the clock (upload ids, generations in mediaLink
# URLs) and the UUIDs in Beam's temporary file names.
_VOLATILE = re.compile(r"(?<=[?&])(upload_id|generation)=[^&]*|[0-9a-f]{8}(-?[0-9a-f]{4}){3}-?[0-9a-f]{12}")


def _unit(*parts: object) -> float:
    """A number in [0, 1) fixed by `parts`: the proxy's only source of 'randomness'."""
    digest = hashlib.sha256("\0".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class FaultProxy(LoopbackServer):
    """The proxy server, run on a daemon thread; a context manager.

    Args:
      upstream: the emulator's base URL (``http://127.0.0.1:PORT``).
      seed: picks which requests fail, and with what.
      rate: the chance that a request (in the window, within the budget) is faulted.
      max_faults: the most faults injected in all.
      window_s: faults only this long after the first request.
      kinds: the fault kinds to inject (a subset of FAULT_KINDS).
    """

    def __init__(
        self,
        upstream: str,
        *,
        seed: int = 0,
        rate: float = 0.1,
        max_faults: int = 16,
        window_s: float = 60.0,
        kinds: tuple[str, ...] = FAULT_KINDS,
        host: str = "127.0.0.1",
        preconditions: bool = False,
    ) -> None:
        unknown = set(kinds) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {FAULT_KINDS}")
        parts = urlsplit(upstream)
        self.upstream, self.upstream_url = (parts.hostname, parts.port or 80), upstream.rstrip("/")
        self.seed, self.rate, self.max_faults, self.window_s = seed, rate, max_faults, window_s
        super().__init__(_Handler, host, "fault-proxy")
        self.kinds, self.preconditions = tuple(kinds), preconditions
        self._lock = threading.Lock()
        self._conditional = threading.Lock()  # one request with preconditions at a time
        self.refused: list[tuple[str, str]] = []  # (method, target) answered 412
        self._counts: Counter[str] = Counter({kind: 0 for kind in self.kinds})
        self._attempts: Counter[tuple[str, str]] = Counter()
        self._faulted_last: dict[tuple[str, str], bool] = {}
        self._first_request: float | None = None
        self.requests = 0
        self.upstream_errors = 0
        # The faults injected: (seconds since the first request, kind, method, target).
        self.log: list[tuple[float, str, str, str]] = []

    @property
    def counts(self) -> dict[str, int]:
        """Faults injected so far, by kind."""
        with self._lock:
            return dict(self._counts)

    # -- fault decisions ----------------------------------------------------

    def _decide(self, method: str, target: str) -> str | None:
        """The fault for this request, or None to forward it; reserves the fault in the counts."""
        key = (method, target)
        stable = _VOLATILE.sub("~", target)
        with self._lock:
            self.requests += 1
            attempt = self._attempts[(method, stable)]
            self._attempts[(method, stable)] += 1
            now = time.monotonic()
            if self._first_request is None:
                self._first_request = now
            elapsed = now - self._first_request
            if (
                not self.kinds
                or self._faulted_last.get(key)
                or elapsed > self.window_s
                or sum(self._counts.values()) >= self.max_faults
                or _unit(self.seed, method, stable, attempt) >= self.rate
            ):
                self._faulted_last[key] = False
                return None
            kind = min(self.kinds, key=lambda k: self._counts[k])  # round robin: every kind soon exercised
            self._counts[kind] += 1
            self._faulted_last[key] = True
            self.log.append((round(elapsed, 3), kind, method, target))
            return kind

    def _withdraw(self, method: str, target: str, kind: str) -> None:
        """Undo a reserved fault that could not be applied (a reply too short to truncate)."""
        with self._lock:
            self._counts[kind] -= 1
            self._faulted_last[(method, target)] = False
            for i in range(len(self.log) - 1, -1, -1):
                if self.log[i][1:] == (kind, method, target):
                    del self.log[i]
                    break


class _Handler(BaseHTTPRequestHandler):
    """One client connection: HTTP/1.1 with keep-alive, as google-cloud-storage's pool expects."""

    protocol_version = "HTTP/1.1"
    timeout = 120  # an idle keep-alive connection's thread ends eventually

    def log_message(self, format, *args) -> None:
        pass  # quiet: tests read `proxy.log` instead

    def _relay(self) -> None:
        proxy: FaultProxy = self.server.owner
        body = self._read_body()  # always read in full, so a fault never leaves bytes on the socket
        checks = _preconditions(self.command, self.path, body) if proxy.preconditions else []
        if checks:
            with proxy._conditional:
                if any(self._generation(bucket, name) != wanted for bucket, name, wanted in checks):
                    proxy.refused.append((self.command, self.path))
                    self._send(412, [("Content-Type", "application/json")], _error_body("412"))
                    return
                self._forward_and_send(body)
            return
        kind = proxy._decide(self.command, self.path)
        if kind in ("503", "429"):
            self._send(int(kind), [("Content-Type", "application/json"), ("Retry-After", "0")], _error_body(kind))
            return
        if kind == "drop":
            self.close_connection = True  # the server closes the socket: no status line at all
            return
        self._forward_and_send(body, kind)

    def _forward_and_send(self, body: bytes | None, kind: str | None = None) -> None:
        proxy: FaultProxy = self.server.owner
        try:
            status, reason, headers, payload = self._forward(body)
        except OSError as e:  # the emulator itself failed: not an injected fault, tell the client
            with proxy._lock:
                proxy.upstream_errors += 1
            self._send(502, [("Content-Type", "text/plain")], f"fault proxy: upstream failed: {e!r}".encode())
            return
        if kind == "truncate":
            if len(payload) >= 2 and self.command != "HEAD":
                self._send(status, headers, payload, reason=reason, cut=len(payload) // 2)
                return
            proxy._withdraw(self.command, self.path, kind)
        self._send(status, headers, payload, reason=reason)

    def _generation(self, bucket: str, name: str) -> int:
        """The object's current generation at the emulator; 0 when there is none."""
        conn = http.client.HTTPConnection(*self.server.owner.upstream, timeout=120)
        try:
            conn.request("GET", f"/storage/v1/b/{bucket}/o/{quote(name, safe='')}")
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        return int(json.loads(data)["generation"]) if resp.status == 200 else 0

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _relay

    def _read_body(self) -> bytes | None:
        """The request body as sent: by Content-Length, or de-chunked (streamed uploads without a
        length), or None when the request has none."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()  # the CRLF after each chunk
        length = self.headers.get("Content-Length")
        return self.rfile.read(int(length)) if length is not None else None

    def _forward(self, body: bytes | None) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """Send the request to the emulator on a fresh connection; the whole reply."""
        conn = http.client.HTTPConnection(*self.server.owner.upstream, timeout=120)
        try:
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    conn.putheader(name, value)
            if body is not None:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            resp = conn.getresponse()
            payload = resp.read()  # by Content-Length, chunked or to EOF: http.client knows all three
            headers = [(n, self._own_links(v)) for n, v in resp.getheaders() if n.lower() not in _HOP_BY_HOP]
            if resp.getheader("Content-Type", "").startswith(("application/json", "multipart/")):
                payload = self._own_links(payload)
            if self.command == "HEAD" and resp.getheader("Content-Length") is not None:
                headers.append(("Content-Length", resp.getheader("Content-Length")))
            return resp.status, resp.reason, headers, payload
        finally:
            conn.close()

    def _own_links(self, value):
        """The emulator's address replaced by the proxy's, in a header (``Location``) or a JSON or
        batch reply: an object's ``mediaLink`` is fixed when it is written, so objects written
        straight to the emulator (test set-up) would otherwise be downloaded around the proxy."""
        upstream, url = self.server.owner.upstream_url, self.server.owner.url
        if isinstance(value, bytes):
            return value.replace(upstream.encode(), url.encode())
        return value.replace(upstream, url)

    def _send(self, status: int, headers, payload: bytes, reason: str | None = None, cut: int | None = None) -> None:
        """Reply with `payload` framed by Content-Length; with `cut`, only its first `cut` bytes
        go out and the connection is closed (the client sees an incomplete read)."""
        self.send_response_only(status, reason)
        for name, value in headers:
            self.send_header(name, value)
        if self.command != "HEAD" and status >= 200 and status not in (204, 304):
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload if cut is None else payload[:cut])
        self.wfile.flush()
        if cut is not None:
            self.close_connection = True


_OBJECT = re.compile(r"/(?:upload/)?storage/v1/b/([^/]+)/o(?:/([^/?]+))?(/compose)?$")


def _preconditions(method: str, target: str, body: bytes | None) -> list[tuple[str, str, int]]:
    """(bucket, object, generation it must have) for each precondition of a request: its
    ifGenerationMatch (on the object its path names, or an upload's `name`), and each compose
    source's."""
    url = urlsplit(target)
    match = _OBJECT.match(url.path)
    if not match:
        return []
    bucket, name, compose = match.group(1), unquote(match.group(2) or ""), match.group(3)
    query = parse_qs(url.query)
    checks = []
    if "ifGenerationMatch" in query:
        if not name:  # an upload: the name is in the query or in the JSON part of the body
            name = query.get("name", [""])[0] or _uploaded_name(body)
        checks.append((bucket, name, int(query["ifGenerationMatch"][0])))
    if compose and method == "POST" and body:
        for source in json.loads(body).get("sourceObjects", []):
            wanted = source.get("objectPreconditions", {}).get("ifGenerationMatch")
            if wanted is not None:
                checks.append((bucket, source["name"], int(wanted)))
    return checks


def _uploaded_name(body: bytes | None) -> str:
    """The object name in a multipart upload's JSON metadata part."""
    found = re.search(rb"\r\n\r\n(\{.*?\})\r\n--", body or b"", re.DOTALL)
    return json.loads(found.group(1)).get("name", "") if found else ""


def _error_body(code: str) -> bytes:
    """A GCS JSON API error body, so clients parse a reason as they would from GCS."""
    message, reason = {
        "503": ("Service Unavailable", "backendError"),
        "429": ("Too Many Requests", "rateLimitExceeded"),
        "412": ("Precondition Failed", "conditionNotMet"),
    }[code]
    error = {"code": int(code), "message": f"{message} (injected)", "errors": [{"message": message, "reason": reason}]}
    return json.dumps({"error": error}).encode()
