"""A local download mirror for the tests: http.server in a thread, serving a folder with HTTP Range support.

``cut`` names relative paths whose first response is cut off halfway (the connection is dropped), like a
transfer interrupted by the network. ``requests`` records (path, Range header) for every request. A test may make
it answer every request with an error status (``failing = 503``), hold every request until it opens ``gate``
(``stall()``), or script the next answers (``script = [503, "stall"]``: a status, "stall" or None to serve), and
change any of these while it serves.
"""

from __future__ import annotations

import contextlib
import http.server
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path


class Mirror:
    def __init__(self, root: Path, cut: tuple[str, ...] = ()) -> None:
        self.root = Path(root)
        self.cut = set(cut)
        self.requests: list[tuple[str, str | None]] = []
        self.failing: int | None = None  # an HTTP status to answer every request with
        self.script: list[int | str | None] = []  # the next requests' answers, before ``failing``
        self.gate = threading.Event()  # held requests go on once it is set
        self.gate.set()
        mirror = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                rel = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path).lstrip("/")
                rng = self.headers.get("Range")
                mirror.requests.append((rel, rng))
                answer = mirror.script.pop(0) if mirror.script else mirror.failing
                if answer == "stall":
                    mirror.gate.clear()
                mirror.gate.wait()
                if isinstance(answer, int):
                    self.send_error(answer)
                    return
                path = (mirror.root / rel).resolve()
                if not path.is_relative_to(mirror.root.resolve()) or not path.is_file():
                    self.send_error(404)
                    return
                data = path.read_bytes()
                start = int(rng.split("=")[1].split("-")[0]) if rng else 0
                if start >= len(data) and rng:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.end_headers()
                    return
                body = data[start:]
                self.send_response(206 if rng else 200)
                if rng:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if rel in mirror.cut:
                    mirror.cut.discard(rel)
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(2)  # drop the connection mid-transfer
                    return
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stall(self) -> None:
        """Hold every request from now on (a server that accepts and never answers) until ``gate`` opens."""
        self.gate.clear()

    def requested(self, rel: str) -> list[str | None]:
        """The Range headers of every request for one file (None: the whole file)."""
        return [rng for path, rng in self.requests if path == rel]


@contextlib.contextmanager
def serving(root: Path, cut: tuple[str, ...] = ()) -> Iterator[Mirror]:
    mirror = Mirror(root, cut)
    thread = threading.Thread(target=mirror.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield mirror
    finally:
        mirror.gate.set()
        mirror.server.shutdown()
        mirror.server.server_close()
