"""Every knob in one place.

Each field maps onto an environment variable ``ANIPAINT_<FIELD>`` (upper case); CLI flags and API fields
override per call. Read once with :func:`get_settings`; tests may call :func:`reload_settings` after changing
the environment.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from anipaint.errors import SettingsError

_PACKAGE = Path(__file__).resolve().parent

def checkout_root() -> Path | None:
    """The repository this package runs from, or None for an installed package (a wheel in site-packages).

    A checkout is the package's parent folder holding this project's pyproject.toml; an installed package's
    parent is site-packages, which has none (an editable install runs from the checkout, so it counts).
    """
    root = _PACKAGE.parent
    try:
        pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if 'name = "anipaint"' in pyproject else None


def _default_home() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "anipaint"


def _default_sources() -> Path:
    """A checkout reads the project's sibling ../shared/models; an installed package its own downloads."""
    root = checkout_root()
    if root is not None:
        return (root.parent / "shared" / "models").resolve()
    home = os.environ.get("ANIPAINT_HOME")
    return (Path(home).expanduser() if home else _default_home()) / "downloads"


def knob(default: Any, doc: str, *, factory: Callable[[], Any] | None = None) -> Any:
    """A setting's field: its default (or a factory for it) and the sentence docs/configuration.md shows."""
    if factory is not None:
        return field(default_factory=factory, metadata={"doc": doc})
    return field(default=default, metadata={"doc": doc})


# The first setting of each group, with the group's heading in docs/configuration.md.
SECTIONS = {"sources": "Models and downloads", "default_style": "Pictures", "backend": "Engine", "faces": "Faces",
            "host": "Service"}


@dataclass(frozen=True)
class Settings:
    """Every knob; each is the environment variable ``ANIPAINT_<NAME>`` (docs/configuration.md lists them)."""

    sources: Path = knob(
        None, "Folder of original model files (read-only): a checkout reads ../shared/models, an installed package "
        "`<home>/downloads`.", factory=_default_sources
    )
    home: Path = knob(
        None, "The model store and data folder: converted models, engine builds, downloads, job "
        "results.", factory=_default_home
    )
    mirror: str = knob(
        "", "A base URL holding the sources folder's relative paths, used instead of every file's public origin."
    )
    offline: bool = knob(
        False, "Never download: a style whose files are missing is an error that names `anipaint models fetch <style>`."
    )
    auto_fetch: bool = knob(True, "Download a style's missing files when it is first used (unless offline).")
    download_timeout: float = knob(
        60.0, "Seconds a download may go without receiving a byte (or waiting on another process's download of the "
        "same file that makes no progress) before it gives up."
    )
    download_retry: float = knob(
        30.0, "After a style's download on first use failed: seconds until the next try, doubling with each failure "
        "up to an hour. Until then a paint of that style fails at once; `anipaint models fetch` tries at any time."
    )
    background: str = knob(
        "all", "What a server does after its default style paints: `all` converts the other styles and builds and "
        "measures every style's fast engine in a low-priority process; `convert` only converts; `off` does nothing."
    )
    background_nice: int = knob(19, "CPU priority of that background process (19: only what paints leave over).")

    default_style: str = knob(
        "v3-hayao", "The style a paint uses when none is named (an id or alias); commercial-only mode falls back to an "
        "offered one."
    )
    commercial_only: bool = knob(
        False, "Offer only styles whose weights' licence allows commercial use; every other style is refused."
    )
    max_side: int = knob(512, "Long-side cap of a painted picture in pixels; 0 at call time means full resolution.")
    tile_size: int = knob(512, "Tile edge for full-resolution painting in tiles.")
    tile_overlap: int = knob(64, "Overlap blended between tiles.")
    large_mode: str = knob(
        "strips", "Full resolution: `strips` paints layer by layer in row strips, exactly as one whole pass "
        "(activations in temporary files); `tiles` paints independent blended tiles. `exact` means `strips`."
    )
    scratch_dir: Path | None = knob(
        None, "Where the strips keep their temporary activation files (default: the system temp folder)."
    )

    backend: str = knob(
        "auto", "Engine backend: `auto` (measured on this machine), `torch`, `compiled`, `onnxruntime`, `int8` or "
        "`strips`."
    )
    threads: int = knob(0, "Intra-op threads per paint; 0 = physical cores / jobs.")
    jobs: int = knob(1, "Paints at once per process.")

    faces: bool = knob(True, "Restyle faces at their own resolution by default.")
    face_score_threshold: float = knob(0.7, "The face detector's confidence threshold.")
    face_min_size: int = knob(24, "Smallest face restyled, in source pixels (smaller faces have no detail to restyle).")
    face_size: int = knob(512, "Working size of an aligned face crop in portrait mode.")
    face_cache_size: int = knob(256, "Face detections cached (by picture).")
    face_cache_ttl: float = knob(3600.0, "Seconds a cached face detection is kept.")
    face_detect_max_side: int = knob(1024, "The detector runs on a copy no larger than this.")
    portrait_face_style: str = knob("v3-jp-face", "The face model portrait mode paints each face with.")

    host: str = knob("127.0.0.1", "Address `anipaint serve` listens on.")
    port: int = knob(8000, "Port `anipaint serve` listens on.")
    queue_size: int = knob(8, "Jobs waiting beyond those painting; more are answered 503 with Retry-After.")
    request_timeout: float = knob(120.0, "Seconds /predict waits for its turn and its paint.")
    result_ttl: float = knob(3600.0, "Seconds a finished job's result is kept.")
    max_upload_bytes: int = knob(20 * 1024 * 1024, "Largest picture upload in bytes.")
    max_pixels: int = knob(40_000_000, "Largest picture in pixels.")
    video_max_bytes: int = knob(
        64 * 1024 * 1024, "Largest clip upload in bytes (Celery keeps an upload in Redis until a worker takes it: "
        "Redis needs about queue_size × this to spare)."
    )
    video_max_seconds: float = knob(60.0, "Longest clip in seconds.")
    video_max_pixels: int = knob(3840 * 2160, "Largest clip frame in pixels, before the cap.")
    data_dir: Path | None = knob(None, "Where job results are kept (default `<home>/jobs`).")
    object_store: str = knob(
        "", "With a broker: `s3://bucket/prefix` keeps uploads and results in an S3-compatible object store (the "
        "standard AWS_* variables say where and as whom), so Redis holds only state; empty: in Redis."
    )
    object_store_wait: float = knob(
        120.0, "Seconds a painter waits for an unreachable object store (to read a job's upload or store its result) "
        "before failing the job with that reason."
    )
    broker_url: str = knob(
        "", "Empty: the embedded queue in this process; `redis://…`: Celery workers on any machines."
    )
    redelivery_timeout: int = knob(900, "Seconds before a job held by a vanished worker is handed to another.")
    log_level: str = knob("info", "The server's log level.")
    full_max_pixels: int = knob(16_777_216, "Largest picture painted at full resolution (4096²); 0 = max_pixels.")
    scratch_reserve_bytes: int = knob(
        1 << 30, "Full-resolution work starts only if this much scratch space stays free."
    )
    shutdown_grace: float = knob(60.0, "Seconds a stopping server lets running paints finish.")
    header_timeout: float = knob(10.0, "Seconds a client may take to send a request's headers.")
    body_timeout: float = knob(15.0, "Seconds a client may pause while sending a body.")
    max_uploads: int = knob(16, "Request bodies read at once; more are answered 503 before reading.")
    metrics_allow: str = knob(
        "", "Client addresses or networks allowed to read /metrics, comma-separated; empty = all."
    )
    cors_origins: str = knob("", "Origins allowed to call the API from a browser, comma-separated; empty = none.")
    api_keys: str = knob("", "Comma-separated API keys, or a file of keys (one a line); empty = no keys needed.")
    key_rate: int = knob(60, "Requests per key per minute.")
    key_jobs: int = knob(4, "Jobs per key queued or running at once.")

    @property
    def fetches_on_first_use(self) -> bool:
        """Whether a style whose files are missing is downloaded when it is first used."""
        return self.auto_fetch and not self.offline

    @property
    def large_in_strips(self) -> bool:
        """Whether full-resolution pictures are painted in strips (``large_mode`` "strips", or its older name)."""
        return self.large_mode.lower() in ("strips", "exact")

    @property
    def samples_dir(self) -> Path:
        """Real photos beside the model sources (``<sources>/../samples``): auto's checks and int8 calibration."""
        return Path(self.sources).parent / "samples"

    @property
    def models_dir(self) -> Path:
        return self.home / "models"

    @property
    def jobs_dir(self) -> Path:
        return self.data_dir if self.data_dir is not None else self.home / "jobs"


def to_env(settings: Settings) -> dict[str, str]:
    """The ``ANIPAINT_*`` variables that recreate these settings in a child process."""
    env: dict[str, str] = {}
    for f in dataclasses.fields(Settings):
        value = getattr(settings, f.name)
        if value is None:
            continue
        env[f"ANIPAINT_{f.name.upper()}"] = ("1" if value else "0") if isinstance(value, bool) else str(value)
    return env


_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _coerce(name: str, value: str, target: object) -> object:
    """An environment string as the field's type; a value that isn't one is a SettingsError naming the variable."""
    word = value.strip().lower()
    if target is bool:
        if word not in _TRUE | _FALSE:
            raise SettingsError(f"ANIPAINT_{name.upper()}={value!r}: expected one of 1/0, true/false, yes/no, on/off")
        return word in _TRUE
    if target in (int, float):
        try:
            return target(word)  # type: ignore[operator]
        except ValueError:
            kind = "a whole number" if target is int else "a number"
            raise SettingsError(f"ANIPAINT_{name.upper()}={value!r}: expected {kind}") from None
    if target is Path or target == "Path | None" or target == "Path":
        return Path(value).expanduser()
    return value


def settings_from_env(environ: dict[str, str] | None = None) -> Settings:
    """Build settings from ``ANIPAINT_*`` variables on top of the defaults."""
    env = os.environ if environ is None else environ
    overrides: dict[str, object] = {}
    hints = {f.name: f.type for f in dataclasses.fields(Settings)}
    for name, hint in hints.items():
        raw = env.get(f"ANIPAINT_{name.upper()}")
        if raw is None or raw == "":
            continue
        kind: object = {"bool": bool, "int": int, "float": float, "str": str}.get(str(hint), Path)
        overrides[name] = _coerce(name, raw, kind)
    return Settings(**overrides)  # type: ignore[arg-type]


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return settings_from_env()


def reload_settings() -> Settings:
    get_settings.cache_clear()
    return get_settings()


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "`1`" if value else "`0`"
    return "empty" if value in ("", None) else f"`{value}`"


def reference() -> str:
    """docs/configuration.md: every setting's variable, default and meaning, generated from :class:`Settings`."""
    lines = [
        "# Configuration",
        "",
        "<!-- Generated from anipaint/settings.py by `make docs`; a test fails when they differ. -->",
        "",
        "Every setting is an environment variable `ANIPAINT_<NAME>`. Booleans take 1/0, true/false, yes/no or "
        "on/off; a value a setting can't take stops the program with one line naming the variable.",
    ]
    defaults = {"sources": "../shared/models in a checkout, else `<home>/downloads`",
                "home": "`$XDG_CACHE_HOME/anipaint` or `~/.cache/anipaint`"}
    for f in dataclasses.fields(Settings):
        if f.name in SECTIONS:
            lines += ["", f"## {SECTIONS[f.name]}", "", "| variable | default | meaning |", "| --- | --- | --- |"]
        default = defaults.get(f.name) or _shown(f.default)
        meaning = f.metadata["doc"].replace("|", "\\|")
        lines.append(f"| `ANIPAINT_{f.name.upper()}` | {default} | {meaning} |")
    return "\n".join(lines) + "\n"

