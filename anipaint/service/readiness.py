"""Start-up in the background: prepare the default style's model, load it, then hand the rest to a
:class:`~anipaint.warmup.Warmup` (the other styles, the fast engines) so the page paints meanwhile.

``/healthz`` answers at once; ``/readyz`` turns 200 when the default painter is warm.
"""

from __future__ import annotations

import logging
import threading

from anipaint import warmup
from anipaint.models import availability, helpers, store
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
        self.background = warmup.Warmup(settings)

    def states(self) -> list[warmup.StyleState]:
        """Each style: ready, converting, optimising, download or unavailable (and why)."""
        return warmup.style_states(self.settings, self.background if self.warm else None)

    def stop(self) -> None:
        self.background.stop()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="anipaint-warmup", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        from anipaint.painter import get_painter

        s = self.settings
        try:
            style = availability.resolve(None, s)
            self.style_id = style.id
            if not self.warm:
                self.ready, self.state = True, "ready"
                return
            self.state = f"preparing the {style.id} model"
            store.ensure_converted(style, s)  # unless offline, downloads its files first
            if s.faces:
                helpers.install_face_detector(s)
            self.state = f"loading the {style.id} model"
            get_painter(style.id, s).warm()
            self.ready, self.state = True, "ready"
            log.info("ready: %s is loaded", style.id)
        except Exception as exc:  # readyz reports it; the process stays up for the other styles
            self.error = str(exc)
            self.state = f"the default style could not be loaded: {exc}"
            log.exception("warm-up failed")
            return
        # Everything else (the other styles, every fast engine) is done in the background, out of paints' way.
        try:
            self.background.start(first=style.id)
        except Exception:  # noqa: BLE001 - styles still convert on first use
            log.exception("background warm-up could not start")
