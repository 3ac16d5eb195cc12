"""A test HTTP server on a free loopback port, run on a daemon thread: what the GCS stand-ins
(tests/fault_proxy.py, tests/gcs_list_stand_in.py) share. Standard library only."""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _QuietServer(ThreadingHTTPServer):
    """One thread per connection; clients resetting idle keep-alive connections is not an error."""

    daemon_threads = True
    owner: LoopbackServer  # what a handler serves (`self.server.owner`)

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class LoopbackServer:
    """Serves `handler` (a BaseHTTPRequestHandler reaching this object as `self.server.owner`) on
    `host` at a free port; a context manager."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], host: str, thread_name: str) -> None:
        self.handler, self.host, self.thread_name = handler, host, thread_name
        self._server: _QuietServer | None = None

    def start(self):
        self._server = _QuietServer((self.host, 0), self.handler)  # port 0: a free port, no race
        self._server.owner = self
        threading.Thread(target=self._server.serve_forever, name=self.thread_name, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"
