"""Downloading one model file: resumable, checksummed, and never half there.

A transfer writes ``<file>.part`` and continues from its length with an HTTP Range request, so a cut connection
costs only what was not received yet. The finished file is checked against its sha256 and renamed into place
atomically; a file that fails the check is deleted with a message naming both digests. An address ending in
``#<member>`` names a file inside a ``.tgz`` archive (an npm package): the archive is downloaded the same way
and only that member is kept.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from anipaint.errors import ChecksumError, DownloadError, ModelStoreError

Progress = Callable[[int, "int | None"], None]  # bytes received so far, total bytes (None: unknown)
_CHUNK = 1 << 16
_NOT_THERE = {401, 403, 404, 410}  # the origin says the file is not there for us: waiting alone will not help
_bars_shown = True  # the CLI's -q turns the progress bars off (show_progress_bars)


def show_progress_bars(shown: bool) -> None:
    """Whether downloads on first use draw a progress bar on a terminal's stderr (never when it is not one)."""
    global _bars_shown
    _bars_shown = shown


@contextlib.contextmanager
def progress_bar(name: str) -> Iterator[Progress | None]:
    """A download's progress as a bar on stderr, when stderr is a terminal and bars are shown; else None."""
    if not (_bars_shown and sys.stderr.isatty()):
        yield None
        return
    from tqdm import tqdm

    with tqdm(desc=f"downloading {name}", unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr) as bar:

        def show(done: int, total: int | None) -> None:
            if total and bar.total != total:
                bar.total = total
            bar.update(done - bar.n)

        yield show


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(url: str, dest: Path, *, sha256: str | None = None, timeout: float = 60.0,
             progress: Progress | None = None) -> Path:
    """Fetch ``url`` into ``dest`` (resuming a previous partial transfer) and return ``dest``.

    Raises :class:`ChecksumError` (and removes what was downloaded) when ``sha256`` doesn't match, and
    :class:`DownloadError` for a transfer that failed, was cut or stalled for ``timeout`` seconds (the partial file
    is kept to resume), or when another process downloading the same file makes no progress for that long."""
    address, _, member = url.partition("#")
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + (".tgz.part" if member else ".part"))
    with _locked(dest, part, timeout):
        if dest.is_file() and (sha256 is None or sha256_file(dest) == sha256):
            return dest
        _transfer(address, part, timeout, progress)
        if member:
            part = _extract(part, member, dest.with_name(dest.name + ".part"))
        if sha256 is not None:
            actual = sha256_file(part)
            if actual != sha256:
                part.unlink(missing_ok=True)
                raise ChecksumError(
                    f"{dest.name} from {address} fails its checksum: expected sha256 {sha256}, got {actual}; "
                    "the download was deleted"
                )
        os.replace(part, dest)
    return dest


@contextlib.contextmanager
def _locked(dest: Path, part: Path, timeout: float) -> Iterator[None]:
    """One download of ``dest`` at a time across processes. Waiting for another process's download is bounded:
    as long as its ``part`` file grows, and at most ``timeout`` seconds without a new byte (a process that was
    stopped, or hangs on a dead connection, must not hold up a paint for as long as it lives)."""
    locks = dest.parent / ".locks"
    locks.mkdir(exist_ok=True)
    lock = FileLock(str(locks / f"{dest.name}.lock"))
    seen, since = _size(part), time.monotonic()
    while True:
        try:
            lock.acquire(timeout=min(1.0, timeout))
            break
        except Timeout:
            now, size = time.monotonic(), _size(part)
            if size != seen:
                seen, since = size, now
            elif now - since >= timeout:
                raise DownloadError(
                    f"{dest.name} is being downloaded by another process that has received nothing for "
                    f"{timeout:g} s; try again shortly",
                    why="another process is downloading it and has received nothing for a while",
                ) from None
    try:
        yield
    finally:
        lock.release()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _transfer(url: str, part: Path, timeout: float, progress: Progress | None) -> None:
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    host = urllib.parse.urlsplit(url).netloc or url
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            # 206: the server resumed where we stopped; 200: it sent the whole file, so start over.
            resumed = bool(have) and response.status == 206
            length = response.headers.get("Content-Length")
            expected = int(length) if length is not None else None
            start = have if resumed else 0
            total = start + expected if expected is not None else None
            received = 0
            with open(part, "ab" if resumed else "wb") as fh:
                if progress:
                    progress(start, total)
                for block in iter(lambda: response.read(_CHUNK), b""):
                    fh.write(block)
                    received += len(block)
                    if progress:
                        progress(start + received, total)
            # http.client returns a short body without complaint when the connection drops; check it ourselves.
            if expected is not None and received < expected:
                raise DownloadError(
                    f"download from {url} was cut off after {start + received} of {total} bytes; "
                    "run the same command again to resume",
                    why=f"the transfer from {host} was cut off",
                )
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # the .part file already holds the whole file
            return
        raise DownloadError(f"download from {url} failed: HTTP {exc.code}", why=f"HTTP {exc.code} from {host}",
                            lasting=exc.code in _NOT_THERE) from exc
    except (OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise DownloadError(f"download from {url} failed: {exc}; run the same command again to resume",
                            why=f"cannot reach {host}: {reason}") from exc


def _extract(archive: Path, member: str, out: Path) -> Path:
    """The one member of a downloaded archive, written to ``out``; the archive is removed either way."""
    try:
        with tarfile.open(archive, "r:*") as tar:
            source = tar.extractfile(member)
            if source is None:
                raise ModelStoreError(f"{archive.name}: {member} is not a file in the archive")
            with source, open(out, "wb") as fh:
                for block in iter(lambda: source.read(1 << 20), b""):
                    fh.write(block)
    except KeyError:
        out.unlink(missing_ok=True)
        raise ModelStoreError(f"{archive.name}: the archive has no {member}") from None
    except tarfile.TarError as exc:
        out.unlink(missing_ok=True)
        raise ModelStoreError(f"{archive.name}: not a readable archive ({exc}); deleted, try again") from exc
    finally:
        archive.unlink(missing_ok=True)
    return out
