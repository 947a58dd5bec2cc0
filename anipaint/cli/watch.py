"""Watch mode (``anipaint convert --watch IN OUT``): paint every new or changed picture or video as it arrives.

watchdog's thread only queues the paths it hears about; the calling thread decides when a file is complete and
paints one file at a time, since a painter is not shared across threads. What was painted, or found broken, is
kept in a small manifest in the output folder, so that a restart repaints only what changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from watchdog.events import EVENT_TYPE_CREATED, EVENT_TYPE_MOVED, FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from anipaint.errors import AnipaintError

MANIFEST = ".anipaint-watch.json"
# What browsers, download managers, editors and copy tools write before (or beside) the real file.
TEMPORARY_SUFFIXES = frozenset({".part", ".partial", ".tmp", ".temp", ".crdownload", ".download", ".filepart", ".swp"})
# Events that bring nothing to paint (a deletion, a file opened, or closed after reading only).
IGNORED_EVENTS = frozenset({"deleted", "opened", "closed_no_write"})
# How often files still settling are looked at; also about how soon a set ``stop`` is noticed.
POLL_SECONDS = 0.2

Convert = Callable[[Path, Path], Path]


def watch_folder(src: Path, dst: Path, convert: Convert, *, wanted: Callable[[Path], bool], settle: float = 1.0,
                 stop: threading.Event | None = None) -> int:
    """Paint what is in ``src`` and not painted yet into ``dst`` (subfolders mirrored), then each file that arrives
    or changes, once it has stayed the same for ``settle`` seconds. Runs until Ctrl-C or ``stop``; returns 0."""
    shown = src
    src, dst = src.resolve(), dst.resolve()
    dst.mkdir(parents=True, exist_ok=True)
    watcher = _Watcher(src, dst, convert, wanted, settle)
    arrived: queue.Queue[Path] = queue.Queue()
    # watchdog's inotify thread warns of this (harmlessly) when nested folders appear at once: not the user's news.
    warnings.filterwarnings("ignore", r"Callback with id .* already exists", RuntimeWarning, r"watchdog\.")
    observer = Observer()
    observer.schedule(_Arrivals(arrived), str(src), recursive=True)
    try:
        observer.start()  # before the first walk, so that nothing written meanwhile is missed
    except OSError as exc:  # e.g. the inotify watch limit, on a very large tree
        raise AnipaintError(f"{shown}: cannot watch this folder: {exc}") from exc
    print(f"watching {shown} for new pictures and videos (Ctrl-C to stop)", file=sys.stderr, flush=True)
    # Only the main thread may set signal handlers (an embedding thread stops the watch with ``stop``).
    in_main = threading.current_thread() is threading.main_thread()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)} if in_main else {}
    if in_main:  # a service manager's stop (SIGTERM) ends the watch as cleanly as Ctrl-C does
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        arrived.put(src)  # the first walk: a folder in the queue is walked by this thread
        while not (stop is not None and stop.is_set()):
            watcher.step(arrived)
    except KeyboardInterrupt:
        for sig in handlers:  # a second Ctrl-C while tidying up would end in a traceback
            signal.signal(sig, signal.SIG_IGN)
        watcher.abandon()
    finally:
        observer.stop()
        if observer.is_alive():
            observer.join(timeout=5)
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
    print(f"watching stopped: {watcher.painted} painted, {watcher.skipped} skipped", file=sys.stderr, flush=True)
    return 0


def _interrupt(signum: int, frame: object) -> None:  # noqa: ARG001 - a signal handler's signature
    raise KeyboardInterrupt


class _Arrivals(FileSystemEventHandler):
    """On watchdog's thread: queue the path an event names, nothing else."""

    def __init__(self, arrived: queue.Queue[Path]) -> None:
        self.arrived = arrived

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in IGNORED_EVENTS:
            return
        # A folder counts only when it appears (created, or moved in whole, which brings no events for its files);
        # a folder's "modified" comes with every file written in it.
        if event.is_directory and event.event_type not in (EVENT_TYPE_CREATED, EVENT_TYPE_MOVED):
            return
        where = event.dest_path if event.event_type == EVENT_TYPE_MOVED else event.src_path
        if where:
            self.arrived.put(Path(os.fsdecode(where)))


class _Watcher:
    """The painting thread's state: files settling, the manifest, the file being painted, the counts."""

    def __init__(self, src: Path, dst: Path, convert: Convert, wanted: Callable[[Path], bool], settle: float) -> None:
        self.src, self.dst, self.convert, self.wanted, self.settle = src, dst, convert, wanted, settle
        # path -> ((size, mtime_ns) last seen, when it was first seen so); dicts keep order: first come, first painted.
        self.settling: dict[Path, tuple[tuple[int, int] | None, float]] = {}
        self.manifest = _load_manifest(dst / MANIFEST)
        self.current: tuple[Path, dict[Path, int]] | None = None  # the output folder and its files before a paint
        self.painted = self.skipped = 0

    def step(self, arrived: queue.Queue[Path]) -> None:
        """Take in what arrived, paint at most one complete file, or wait a moment for more."""
        try:
            while True:
                self._note(arrived.get_nowait())
        except queue.Empty:
            pass
        ready = self._ready()
        if ready is not None:
            self._consider(ready)
            return
        try:
            self._note(arrived.get(timeout=POLL_SECONDS))
        except queue.Empty:
            pass

    def _note(self, path: Path) -> None:
        if path.is_dir():
            for inner in sorted(path.rglob("*")):
                if inner.is_file():
                    self._note(inner)
        elif self._candidate(path):
            self.settling.setdefault(path, (None, 0.0))

    def _candidate(self, path: Path) -> bool:
        """By its name only (the file may be half written): not ours, not hidden, not a temporary file."""
        if path.is_relative_to(self.dst) or not path.is_relative_to(self.src):  # an output folder inside the input
            return False
        name = path.name
        return not (any(part.startswith(".") for part in path.relative_to(self.src).parts) or name.startswith("~")
                    or name.endswith("~") or path.suffix.lower() in TEMPORARY_SUFFIXES)

    def _ready(self) -> Path | None:
        """The first file whose size and mtime have stayed the same for ``settle`` seconds (a slow copy keeps
        changing both; a file renamed into the folder is complete at once, and waits ``settle`` all the same)."""
        now = time.monotonic()
        for path, (seen, since) in list(self.settling.items()):
            try:
                st = path.stat()
            except OSError:  # gone again (deleted, or moved away)
                del self.settling[path]
                continue
            state = (st.st_size, st.st_mtime_ns)
            if state != seen:
                self.settling[path] = (state, now)
            elif now - since >= self.settle:
                del self.settling[path]
                if st.st_size > 0:  # an empty file is a copy not begun: its first write brings it back
                    return path
        return None

    def _consider(self, path: Path) -> None:
        """Paint ``path`` unless the manifest says this content was already painted (or found broken)."""
        key = path.relative_to(self.src).as_posix()
        entry = self.manifest.get(key)
        try:
            st = path.stat()
            if not _wants(self.wanted, path):
                return
            if entry and (entry["size"], entry["mtime_ns"]) == (st.st_size, st.st_mtime_ns) and self._kept(entry):
                return
            digest = _sha256(path)
            after = path.stat()
            if (after.st_size, after.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
                self.settling[path] = (None, 0.0)  # written to while being read: let it settle again
                return
        except OSError:  # vanished meanwhile
            return
        facts = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
        if entry and entry.get("sha256") == digest and self._kept(entry):
            self._record(key, {**entry, **facts})  # touched, content unchanged: remember the new mtime, no repaint
            return
        folder = self.dst / path.relative_to(self.src).parent
        self.current = (folder, _files_in(folder))
        try:
            folder.mkdir(parents=True, exist_ok=True)  # convert takes an existing folder as the place to write into
            out = self.convert(path, folder)
        except Exception as exc:  # a broken file (or the painter failing on it): name it and go on watching
            self.abandon()
            self.skipped += 1
            reason = str(exc) if isinstance(exc, AnipaintError) else f"{type(exc).__name__}: {exc}"
            print(f"skipped: {path}: {' '.join(reason.split())}", file=sys.stderr, flush=True)
            if not isinstance(exc, OSError):  # a full disk or a vanished file is worth another try after a restart
                self._record(key, {**facts, "output": None, "error": reason})
            return
        self.current = None
        self.painted += 1
        self._record(key, {**facts, "output": _relative(out, self.dst), "error": None})

    def _kept(self, entry: dict) -> bool:
        """Whether an entry still stands: a broken file's always, a painted one's while its output is there."""
        return entry.get("output") is None or (self.dst / entry["output"]).exists()

    def abandon(self) -> None:
        """Remove what the paint in progress wrote: files in its output folder that are new or changed since it
        began (``convert`` writes straight to its output, so an interrupted one may leave half a file)."""
        if self.current is None:
            return
        folder, before = self.current
        self.current = None
        for path, mtime_ns in _files_in(folder).items():
            if before.get(path) != mtime_ns:
                path.unlink(missing_ok=True)

    def _record(self, key: str, entry: dict) -> None:
        self.manifest[key] = entry
        _save_manifest(self.dst / MANIFEST, self.manifest)


def _wants(wanted: Callable[[Path], bool], path: Path) -> bool:
    try:
        return wanted(path)
    except Exception:  # noqa: BLE001 - a file the check cannot even look at is not one to paint
        return False


def _files_in(folder: Path) -> dict[Path, int]:
    try:
        return {p: p.stat().st_mtime_ns for p in folder.iterdir() if p.is_file() and p.name != MANIFEST}
    except OSError:
        return {}


def _relative(out: Path, dst: Path) -> str:
    try:
        return Path(out).resolve().relative_to(dst).as_posix()
    except ValueError:  # written outside the output folder: keep it as it is
        return str(out)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _load_manifest(path: Path) -> dict[str, dict]:
    """The manifest's entries, or none if it is missing or unreadable (then every file is painted again: nothing
    is lost but time)."""
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["files"]
        return {k: v for k, v in files.items() if isinstance(v, dict) and {"size", "mtime_ns"} <= v.keys()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        print(f"watch: {path} unreadable ({exc}); starting a new one", file=sys.stderr, flush=True)
        return {}


def _save_manifest(path: Path, files: dict[str, dict]) -> None:
    # Written beside and renamed over: a crash or Ctrl-C mid-write leaves the previous manifest whole.
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps({"version": 1, "files": files}, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:  # the output folder is full or read-only: no point watching on
        raise AnipaintError(f"{path}: cannot write the watch manifest: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
