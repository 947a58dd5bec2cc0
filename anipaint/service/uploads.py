"""Request-size limits and uploaded files for the paint endpoints (no pixels are decoded here)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from typing import BinaryIO, cast

from fastapi import HTTPException, UploadFile
from starlette.types import ASGIApp, Message, Receive, Scope, Send

FORM_SLACK = 64 * 1024  # multipart boundaries and the small text fields around the picture
_CHUNK = 1 << 20
_HEAD = 64  # enough for every container signature looks_like_video() reads

UploadData = bytes | BinaryIO  # an upload's bytes, or the seekable file the web process spooled it to


def megabytes(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MB" if n >= 1024 * 1024 else f"{n / 1024:.0f} KB"


def too_large_message(limit: int) -> str:
    return f"the upload is larger than the {megabytes(limit)} limit"


class BodyLimit:
    """ASGI middleware: refuse request bodies over ``max_body`` bytes without ever holding more than that.

    A declared ``Content-Length`` over the cap is answered 413 before the body is read; a body without one
    (chunked) is counted as it streams in and cut off with 413 as soon as it passes the cap.
    """

    def __init__(
        self, app: ASGIApp, max_body: int, upload_limit: int, on_reject: Callable[[], None] | None = None,
        larger: dict[str, int] | None = None,
    ) -> None:
        self.app = app
        self.max_body = max_body
        self.upload_limit = upload_limit
        self.on_reject = on_reject or (lambda: None)
        self.larger = larger or {}  # exact path → its upload limit, where it is above upload_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        upload_limit = self.larger.get(scope.get("path", ""), self.upload_limit)
        max_body = self.max_body - self.upload_limit + upload_limit
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body:
            self.on_reject()
            await self._refuse(send, upload_limit)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_body:  # counted by the app's error handler
                    raise HTTPException(413, too_large_message(upload_limit))
            return message

        await self.app(scope, limited, send)

    async def _refuse(self, send: Send, upload_limit: int) -> None:
        body = json.dumps({"detail": too_large_message(upload_limit)}, separators=(",", ":")).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def read_upload(upload: UploadFile, limit: int) -> bytes:
    """The uploaded file's bytes, refusing (413) anything over ``limit`` without reading past it."""
    parts: list[bytes] = []
    size = 0
    while True:
        chunk = await upload.read(min(_CHUNK, limit + 1 - size))
        if not chunk:
            break
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, too_large_message(limit))
    return b"".join(parts)


class _Unclosable:
    """A spooled upload as its readers get it: the file, but for ``close``. The request owns the upload; a reader
    that closes the file it was handed (Pillow's FTEX opener does, while it reads the header) must not take it away
    from the readers after it."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file

    def close(self) -> None:
        pass

    @property
    def closed(self) -> bool:
        return False

    def __getattr__(self, name: str) -> object:
        return getattr(self._file, name)


def spooled_upload(upload: UploadFile, limit: int) -> tuple[BinaryIO, int]:
    """The uploaded file as the form parser spooled it (in memory up to 1 MB, then in a temporary file) and its size,
    refusing (413) anything over ``limit``. Nothing is read here: a clip is never held whole in memory."""
    size = upload.size
    if size is None:
        size = upload.file.seek(0, os.SEEK_END)
    if size > limit:
        raise HTTPException(413, too_large_message(limit))
    upload.file.seek(0)
    return cast(BinaryIO, _Unclosable(upload.file)), size


def head(data: UploadData, n: int = _HEAD) -> bytes:
    """The first ``n`` bytes of an upload."""
    return bytes(data[:n]) if isinstance(data, bytes | bytearray) else rewound(data).read(n)


def rewound(data: UploadData) -> UploadData:
    """The upload read from its start again (a spooled file is left wherever the last reader stopped)."""
    if not isinstance(data, bytes | bytearray):
        data.seek(0)
    return data


def size_of(data: UploadData) -> int:
    return len(data) if isinstance(data, bytes | bytearray) else data.seek(0, os.SEEK_END)


def write_into(fh: BinaryIO, data: UploadData) -> None:
    """Write an upload into an open file: bytes at once, a spooled file copied in parts from its start."""
    if isinstance(data, bytes | bytearray):
        fh.write(data)
    else:
        shutil.copyfileobj(rewound(data), fh)


def whole(data: UploadData) -> bytes:
    """All of an upload, for the stores that keep it as one value (Redis without an object store)."""
    return bytes(data) if isinstance(data, bytes | bytearray) else rewound(data).read()
