"""Getting every style ready after the page is up, without getting in a paint's way.

A server converts only its default style before it answers (seconds); everything else — converting the other
styles, building their fast engines and measuring them for ``auto`` — is a list of steps that a :class:`Warmup`
runs one at a time in a separate process (``python -m anipaint.warmup``) at the lowest CPU priority. While
this process paints, the warm-up waits between steps, and an engine build or measurement in progress is
stopped (SIGSTOP) until the paint ends: under ``auto`` a paint never needs a lock such a step holds, and a
measurement disturbed by a paint is thrown away by :mod:`anipaint.engine.runtime.timing`. A style paints with its plain
engine as soon as it is converted; when its fast engine is ready the server's painter moves onto it.

:func:`style_states` says for each style: ``ready``, ``converting``, ``optimising`` or ``unavailable`` (why).
``anipaint models prepare`` does all of it up front instead.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from anipaint.models import availability, store
from anipaint.models.failed_downloads import FailedDownload
from anipaint.models.registry import Style, get_style
from anipaint.settings import Settings, get_settings, settings_from_env, to_env

log = logging.getLogger("anipaint.warmup")

READY, CONVERTING, OPTIMISING, DOWNLOAD, UNAVAILABLE = "ready", "converting", "optimising", "download", "unavailable"


@dataclass(frozen=True)
class StyleState:
    style: Style
    state: str  # ready | converting | optimising | download | unavailable
    detail: str | None  # why unavailable, or what is happening
    engine: str | None  # the backend its paints run on now (None: not converted yet)
    failed_download: FailedDownload | None = None  # its last download on first use failed (state download)


# ---- paints under way in this process, which the background warm-up keeps out of the way of --------------
# Whoever paints for the server (its job runner, its thumbnails) marks the paint with painting().
_active = 0
_active_lock = threading.Lock()
_activity_listeners: list[Callable[[bool], None]] = []


@contextlib.contextmanager
def painting() -> Iterator[None]:
    """Mark a paint in progress; listeners hear True when the first starts and False when the last ends."""
    global _active
    with _active_lock:
        _active += 1
        first = _active == 1
    if first:
        for listener in list(_activity_listeners):
            listener(True)
    try:
        yield
    finally:
        with _active_lock:
            _active -= 1
            last = _active == 0
        if last:
            for listener in list(_activity_listeners):
                listener(False)


def on_activity(listener: Callable[[bool], None]) -> Callable[[], None]:
    """Call ``listener(busy)`` when painting starts and stops; returns the function that unsubscribes it."""
    _activity_listeners.append(listener)
    return lambda: _activity_listeners.remove(listener)


def busy() -> bool:
    return _active > 0


# ---- what is done already ------------------------------------------------------------------------------------


def needs_engine(style: Style) -> bool:
    from anipaint.engine import backends

    return len(backends.applicable(style)) > 1


def planned_engine(style: Style, settings: Settings) -> str | None:
    """The backend the style's paints will use with what is built now, or None when its fast engine still has
    to be built (or measured, for ``auto``)."""
    from anipaint.engine import backends

    if not needs_engine(style):
        return backends.PLAIN
    from anipaint.engine import builds

    key = builds.cached_engine_key(store.artefact_path(style, settings))
    return backends.planned(style, settings, key, backends.wanted(settings))


def style_states(settings: Settings | None = None, background: Warmup | None = None) -> list[StyleState]:
    """Every registry style's state here. ``converting`` and ``optimising`` only while a running warm-up
    (``background``) has that step under way or queued; a style whose files come on first use is ``download``
    (with the last failure and its retry time, if its download failed)."""
    from anipaint.engine.backends import PLAIN as plain
    from anipaint.painter import loaded_painter

    s = settings if settings is not None else get_settings()
    out: list[StyleState] = []
    for st in availability.style_status(s):
        style = st.style
        failed = background.failures.get(style.id) if background else None
        planned_convert = background.planned("convert", style.id) if background else None
        if not st.available:
            out.append(StyleState(style, UNAVAILABLE, st.reason, None, st.failed))
        elif not st.converted:
            if st.failed is not None:  # a download failed: say why and when it is tried again, whatever is queued
                out.append(StyleState(style, DOWNLOAD, st.failed.summary(), None, st.failed))
            elif planned_convert:
                what = "downloading and converting" if st.needs_download else "converting"
                out.append(StyleState(style, CONVERTING, f"{what}: {planned_convert}", None))
            elif st.needs_download:
                out.append(StyleState(style, DOWNLOAD, "download on first use", None))
            else:
                note = f"its conversion failed in the background ({failed}); tried again on first use" if failed \
                    else "converted on first use (seconds)"
                out.append(StyleState(style, READY, note, None))
        else:
            painter = loaded_painter(style.id, s)
            live = painter.engine.backend_name if painter is not None and painter.loaded else None
            planned = planned_engine(style, s)
            optimising = background.planned("optimise", style.id) if background else None
            if planned is None and optimising and not failed:
                out.append(StyleState(style, OPTIMISING, f"paints with the plain engine; fast engine: {optimising}",
                                      live or plain))
            elif planned is None and not failed:
                out.append(StyleState(style, READY, "paints with the plain engine; fast engine: "
                                      "`anipaint models prepare`", live or plain))
            else:
                note = f"fast engine failed ({failed}); paints with the plain engine" if failed else None
                out.append(StyleState(style, READY, note, live or planned or plain))
    return out


def plan(settings: Settings, first: str | None = None) -> list[tuple[str, str]]:
    """The steps still to do, (``convert`` | ``optimise``, style id): ``first`` style first, one style at a time."""
    statuses = [st for st in availability.style_status(settings) if st.available]
    statuses.sort(key=lambda st: st.style.id != first)
    steps: list[tuple[str, str]] = []
    for st in statuses:
        if not st.converted:
            steps.append(("convert", st.style.id))
        if settings.background == "all" and needs_engine(st.style) and (
            not st.converted or planned_engine(st.style, settings) is None
        ):
            steps.append(("optimise", st.style.id))
    return steps


# ---- the server's side ---------------------------------------------------------------------------------------


class Warmup:
    """Runs :func:`plan`'s steps in a low-priority child process and moves painters onto their fast engines."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.steps: list[tuple[str, str]] = []
        self.current: tuple[str, str] | None = None
        self.failures: dict[str, str] = {}
        self.finished = threading.Event()
        self._proc: subprocess.Popen | None = None
        self._stopped = False  # the child is SIGSTOPped
        self._lock = threading.Lock()
        self._unsubscribe = None

    def planned(self, step: str, style_id: str) -> str | None:
        """"in progress" or "queued" for a step this warm-up will still do, else None."""
        if self.current == (step, style_id):
            return "in progress"
        if (step, style_id) in self.steps:
            return "queued"
        return None

    def start(self, first: str | None = None, steps: Iterable[tuple[str, str]] | None = None) -> None:
        """Run ``steps`` (default: :func:`plan`'s, ``first`` style first) in the child process."""
        if self.settings.background == "off":
            self.finished.set()
            return
        self.steps = plan(self.settings, first) if steps is None else list(steps)
        if not self.steps:
            self.finished.set()
            return
        _log_beside_the_server(self.settings.log_level)
        env = {**os.environ, **to_env(self.settings), "PYTHONUNBUFFERED": "1"}
        args = [f"{step}:{style_id}" for step, style_id in self.steps]
        self._proc = subprocess.Popen([sys.executable, "-m", "anipaint.warmup", *args], env=env,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self._unsubscribe = on_activity(self._on_activity)
        atexit.register(self.stop)  # never leave a stopped child behind
        threading.Thread(target=self._follow, name="anipaint-warmup", daemon=True).start()

    def stop(self) -> None:
        proc = self._proc
        if self._unsubscribe:
            self._unsubscribe()
            self._unsubscribe = None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def _on_activity(self, busy: bool) -> None:
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                return
            try:
                proc.stdin.write("pause\n" if busy else "go\n")
                proc.stdin.flush()
            except (BrokenPipeError, ValueError, OSError):
                return
            # Builds and measurements hold no lock a paint under `auto` waits for, so they can stop outright.
            from anipaint.engine import backends

            optimising = self.current is not None and self.current[0] == "optimise"
            if busy and optimising and backends.wanted(self.settings) == backends.AUTO:
                proc.send_signal(signal.SIGSTOP)
                self._stopped = True
            elif not busy and self._stopped:
                proc.send_signal(signal.SIGCONT)
                self._stopped = False

    def _follow(self) -> None:
        from anipaint.painter import loaded_painter

        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            step = (event["step"], event["style"])
            if event["status"] == "start":
                self.current = step
                continue
            self.current = None
            if step in self.steps:
                self.steps.remove(step)
            style_id = event["style"]
            if event["status"] == "skipped":
                continue
            if event["status"] == "failed":
                self.failures[style_id] = event.get("detail") or "failed"
                log.warning("background %s of %s failed: %s", *step, self.failures[style_id].splitlines()[0])
                continue
            if event["step"] == "convert":  # one line per style: when it is ready, fast engine or not
                optimising = ("optimise", style_id) in self.steps
                log.log(logging.DEBUG if optimising else logging.INFO, "%s converted; paints with the plain engine",
                        style_id)
                continue
            painter = loaded_painter(style_id, self.settings)
            moved = ""
            if painter is not None and painter.loaded:
                while busy():  # don't load the new engine beside a paint
                    threading.Event().wait(0.2)
                try:
                    painter.reload_engine()
                    moved = f"; {style_id} now paints with {painter.engine.backend_name}"
                except Exception as exc:  # noqa: BLE001 - the old engine keeps painting
                    self.failures[style_id] = f"{type(exc).__name__}: {exc}"
                    moved = f"; it did not load ({self.failures[style_id]}), the plain engine paints"
            log.info("%s engine ready: %s%s", style_id, event.get("summary") or "done", moved)
        self.finished.set()


def _log_beside_the_server(level: str) -> None:
    """uvicorn configures its own loggers only: unless something configured logging (the Celery worker, a test),
    this module's lines (a style's engine is ready, a step failed) go to stderr beside uvicorn's."""
    if log.hasHandlers():
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    log.addHandler(handler)
    level_no = logging.getLevelName(level.upper())
    log.setLevel(level_no if isinstance(level_no, int) else logging.INFO)  # uvicorn's "trace": INFO


def build_engines(style: Style, settings: Settings) -> tuple[str, str]:
    """Everything a style's paints use beyond its conversion, made once per machine (converting first if need
    be): its fast backends, measured for ``auto``, then the browser's model. Returns the engine's line
    (:func:`anipaint.engine.runtime.progress.summary`) and the device model's (``""`` for a style that can't have one;
    its failure is only reported there). Raises when the engines can't be made. ``anipaint models prepare`` and the
    background warm-up both come here."""
    from anipaint import engine
    from anipaint.engine.onnx import device_models, live_models
    from anipaint.engine.runtime import progress

    record = engine.build_backends(style, store.ensure_converted(style, settings), settings)
    if not record.get("choice"):
        raise RuntimeError("no engine chosen")
    device = device_models.make_note(style, settings)
    live = live_models.make_note(style, settings) if device_models.read(style, settings) else ""
    return progress.summary(record), "; ".join(line for line in (device, live) if line)


# ---- the child process ---------------------------------------------------------------------------------------


def run_steps(steps: Iterable[tuple[str, str]], settings: Settings, go: threading.Event) -> None:
    """Do each step once ``go`` is set (the parent clears it while it paints), reporting JSON lines on stdout;
    an engine's line says what it is (:func:`anipaint.engine.runtime.progress.summary`). The libraries' warnings and
    prints are held back (:func:`anipaint.engine.runtime.progress.quiet`): they would land in the server's log."""
    from anipaint.engine.runtime import progress

    def report(step: str, style_id: str, status: str, **more: str) -> None:
        print(json.dumps({"step": step, "style": style_id, "status": status, **more}), flush=True)

    for step, style_id in steps:
        go.wait()
        style = get_style(style_id)
        if step == "optimise" and not store.is_converted(style, settings):
            # Its conversion failed (most often its download): building would download or convert it here, in a
            # step the server stops outright while it paints, holding a lock that paint may need.
            report(step, style_id, "skipped")
            continue
        report(step, style_id, "start")
        try:
            with progress.quiet():
                if step == "convert":
                    store.ensure_converted(style, settings)  # with auto_fetch: downloads a missing source first
                    more = {}
                else:
                    summary, device = build_engines(style, settings)
                    more = {"summary": summary, "device": device}
            report(step, style_id, "done", **more)
        except Exception as exc:  # noqa: BLE001 - reported to the server; the next step still runs
            report(step, style_id, "failed", detail=f"{type(exc).__name__}: {exc}")


def _listen(go: threading.Event) -> None:
    """The parent's pause/go lines; its end (the server exited) ends this process too."""
    for line in sys.stdin:
        if line.strip() == "pause":
            go.clear()
        elif line.strip() == "go":
            go.set()
    os._exit(0)


def _die_with_parent() -> None:
    """Linux: be killed when the server goes, even if it was killed while this process was stopped."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> None:
    _die_with_parent()
    settings = settings_from_env()
    os.nice(max(0, settings.background_nice))
    go = threading.Event()
    go.set()
    threading.Thread(target=_listen, args=(go,), daemon=True).start()
    steps = [tuple(arg.split(":", 1)) for arg in (sys.argv[1:] if argv is None else argv)]
    run_steps(steps, settings, go)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
