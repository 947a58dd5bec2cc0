"""Request guards, as ASGI middleware: security headers on every answer, optional API keys with per-key limits,
and a gate in front of uploads (a cap on bodies read at once, a pause timeout, a full queue refused before the
body is read).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import re
import threading
import time
from collections import deque
from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from anipaint.settings import Settings

# media-src: the page plays the chosen video and the painted one from blob: URLs.
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; "
    "connect-src 'self'; worker-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
# The scripts that run WebAssembly (the device painter's worker and ONNX Runtime Web's files, which run in that
# worker and its threads) may compile it; a worker takes its policy from its own script's answer, so the page and
# everything else keep plain 'self' scripts.
WASM_SCRIPTS = ("/static/device-worker.js", "/static/vendor/ort/")
WASM_CSP = PAGE_CSP.replace("script-src 'self'", "script-src 'self' 'wasm-unsafe-eval'")
_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.S)
PAINT_ROUTES = ("/predict", "/api/jobs")


async def answer(send: Send, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
    """A JSON error answer sent straight from middleware, closing the connection (the body is left unread)."""
    body = json.dumps({"detail": detail}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
           (b"connection", b"close")]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class SecurityHeaders:
    """nosniff, a Content-Security-Policy the page works under, no framing, no referrer, cross-origin isolation
    (COOP + COEP: WebAssembly threads need SharedArrayBuffer). The Swagger page gets its one inline script allowed
    by hash; the WebAssembly scripts (:data:`WASM_SCRIPTS`) may compile WebAssembly."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        docs = scope["path"] == "/docs"
        own = WASM_CSP if scope["path"].startswith(WASM_SCRIPTS) else PAGE_CSP
        start: Message | None = None

        async def with_headers(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                if docs:  # wait for the body: the policy names the inline script's hash
                    return
                message["headers"] = [*message.get("headers", []), *self._headers(own)]
            elif docs and start is not None:
                hashes = " ".join(
                    f"'sha256-{base64.b64encode(hashlib.sha256(m).digest()).decode()}'"
                    for m in _INLINE_SCRIPT.findall(message.get("body", b""))
                )
                policy = PAGE_CSP.replace("script-src 'self'", f"script-src 'self' {hashes}").replace(
                    "style-src 'self'", "style-src 'self' 'unsafe-inline'"
                )
                start["headers"] = [*start.get("headers", []), *self._headers(policy)]
                await send(start)
                start = None
            await send(message)

        await self.app(scope, receive, with_headers)

    @staticmethod
    def _headers(policy: str) -> list[tuple[bytes, bytes]]:
        return [
            (b"x-content-type-options", b"nosniff"),
            (b"content-security-policy", policy.encode()),
            (b"x-frame-options", b"DENY"),
            (b"referrer-policy", b"no-referrer"),
            (b"cross-origin-opener-policy", b"same-origin"),
            (b"cross-origin-embedder-policy", b"require-corp"),
        ]


def load_keys(setting: str) -> set[str]:
    """``ANIPAINT_API_KEYS``: a file of keys (one a line, ``#`` comments), or keys separated by commas."""
    text = setting.strip()
    if not text:
        return set()
    path = Path(text).expanduser()
    if "," not in text and path.is_file():
        lines = path.read_text().splitlines()
        return {line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")}
    return {part.strip() for part in text.split(",") if part.strip()}


def key_id(key: str) -> str:
    """What a job records as its owner: a digest, so the key itself is never written to disk or Redis."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


class _Window:
    """Requests per key in the last minute."""

    def __init__(self, per_minute: int) -> None:
        self.limit = per_minute
        self.seen: dict[str, deque[float]] = {}
        self.lock = threading.Lock()

    def admit(self, who: str) -> int:
        """0 if admitted, else seconds until the next request would be."""
        now = time.monotonic()
        with self.lock:
            times = self.seen.setdefault(who, deque())
            while times and now - times[0] >= 60:
                times.popleft()
            if len(times) >= self.limit:
                return max(1, math.ceil(60 - (now - times[0])))
            times.append(now)
            return 0


class ApiKeys:
    """When keys are configured, ``/predict`` and ``/api/*`` need one (``X-API-Key`` or ``Authorization: Bearer``);
    each key has ``key_rate`` requests a minute and ``key_jobs`` jobs queued or running at once (429 beyond)."""

    def __init__(self, app: ASGIApp, settings: Settings, keys: set[str], queue, metrics) -> None:
        self.app = app
        self.metrics = metrics
        self.ids = {key: key_id(key) for key in keys}
        self.window = _Window(max(1, settings.key_rate))
        self.jobs_per_key = max(1, settings.key_jobs)
        self.queue = queue

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path == "/predict" or path.startswith("/api/")):
            await self.app(scope, receive, send)
            return
        who = self.ids.get(self._key(scope) or "")
        if who is None:
            await answer(send, 401, "an API key is required: send it as X-API-Key or Authorization: Bearer",
                         {"WWW-Authenticate": "Bearer"})
            return
        wait = self.window.admit(who)
        if wait:
            self.metrics.reject("rate_limited")
            await answer(send, 429, f"too many requests for this key; try again in {wait} s",
                         {"Retry-After": str(wait)})
            return
        if scope["method"] == "POST" and path in PAINT_ROUTES:
            if self.queue.owned(who) >= self.jobs_per_key:
                self.metrics.reject("rate_limited")
                await answer(send, 429, f"this key already has {self.jobs_per_key} job(s) waiting or painting; "
                             "try again when one is done", {"Retry-After": str(self.queue.retry_after())})
                return
        scope.setdefault("state", {})["owner"] = who
        await self.app(scope, receive, send)

    @staticmethod
    def _key(scope: Scope) -> str | None:
        headers = dict(scope.get("headers") or [])
        if b"x-api-key" in headers:
            return headers[b"x-api-key"].decode("latin-1").strip()
        auth = headers.get(b"authorization", b"").decode("latin-1")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        return None


class UploadGate:
    """In front of request bodies: a full queue answers 503 before a picture is read, at most ``max_uploads``
    bodies are read at once (503 beyond), and a client that pauses longer than ``body_timeout`` mid-body gets
    408 and is disconnected."""

    def __init__(self, app: ASGIApp, settings: Settings, queue, metrics) -> None:
        self.app = app
        self.queue = queue
        self.metrics = metrics
        self.max_uploads = max(1, settings.max_uploads)
        self.body_timeout = settings.body_timeout
        self.reading = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        if scope["path"] in PAINT_ROUTES and self.queue.full():
            retry = self.queue.retry_after()
            why = "the server is restarting" if self.queue.draining() else "the painter is busy: every slot is taken"
            self.metrics.reject("busy")
            await answer(send, 503, f"{why}; try again in {retry} s", {"Retry-After": str(retry)})
            return
        if self.reading >= self.max_uploads:
            self.metrics.reject("busy")
            await answer(send, 503, "too many uploads at once; try again in a moment", {"Retry-After": "2"})
            return
        self.reading += 1
        done = False

        def finish() -> None:
            nonlocal done
            if not done:
                done = True
                self.reading -= 1

        async def timed() -> Message:
            if done:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.body_timeout)
            except asyncio.TimeoutError:
                finish()
                raise BodyTimeout() from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                finish()
            return message

        try:
            await self.app(scope, timed, send)
        finally:
            finish()


class BodyTimeout(HTTPException):
    """The client paused mid-body for longer than ``settings.body_timeout`` (an HTTP error, so that form parsing
    passes it on as it is)."""

    def __init__(self) -> None:
        super().__init__(408, "the upload stalled; send the picture again", headers={"Connection": "close"})
