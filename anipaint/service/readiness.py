"""Start-up in the background: prepare the default style's model, load it, then prepare the rest.

``/healthz`` answers at once; ``/readyz`` turns 200 when the default painter is warm.
"""

from __future__ import annotations

import logging
import os
import threading

from anipaint import store
from anipaint.settings import Settings

log = logging.getLogger("anipaint.service")


class Readiness:
    def __init__(self, settings: Settings, *, warm: bool = True) -> None:
        self.settings = settings
        self.warm = warm  # False when remote workers paint: then nothing needs loading here
        self.ready = False
        self.state = "starting"
        self.style_id: str | None = None
        self.error: str | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="anipaint-warmup", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        from anipaint.painter import get_painter

        s = self.settings
        try:
            style = store.resolve(None, s)
            self.style_id = style.id
            if not self.warm:
                self.ready, self.state = True, "ready"
                return
            self.state = f"preparing the {style.id} model"
            store.prepare_style(style, s)
            if s.faces:
                store.prepare_face_detector(s)
            self.state = f"loading the {style.id} model"
            get_painter(style.id, s).warm()
            self.ready, self.state = True, "ready"
            log.info("ready: %s is loaded", style.id)
        except Exception as exc:  # readyz reports it; the process stays up for the other styles
            self.error = str(exc)
            self.state = f"the default style could not be loaded: {exc}"
            log.exception("warm-up failed")
            return
        # The other styles whose sources are here convert now, at low priority, rather than on first use.
        todo = [st.style.id for st in store.style_status(s) if st.available and not st.prepared]
        if not todo:
            return
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)  # this thread only (Linux)
        except (AttributeError, OSError):
            pass
        try:
            for style_id, outcome in store.prepare(todo, s).items():
                log.info("prepare %s: %s", style_id, outcome)
        except Exception:
            log.exception("preparing the other styles failed")
