"""A local download mirror for the tests: http.server in a thread, serving a folder with HTTP Range support.

``cut`` names relative paths whose first response is cut off halfway (the connection is dropped), like a
transfer interrupted by the network. ``requests`` records (path, Range header) for every request.
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
        mirror = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                rel = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path).lstrip("/")
                rng = self.headers.get("Range")
                mirror.requests.append((rel, rng))
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
        mirror.server.shutdown()
        mirror.server.server_close()
