"""Every knob in one place.

Each field maps onto an environment variable ``ANIPAINT_<FIELD>`` (upper case); CLI flags and API fields
override per call. Read once with :func:`get_settings`; tests may call :func:`reload_settings` after changing
the environment.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

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


@dataclass(frozen=True)
class Settings:
    # Where the original model files are read from (read-only), and where converted models live.
    sources: Path = field(default_factory=_default_sources)
    home: Path = field(default_factory=_default_home)
    # Downloads: one base URL holding the sources folder's relative paths replaces every file's public origin. A
    # style whose files are missing is downloaded when it is first used, unless offline (or auto_fetch off):
    # then only `anipaint models fetch` downloads.
    mirror: str = ""
    offline: bool = False
    auto_fetch: bool = True
    # What a server does after its default style paints: "all" converts the other styles and builds and measures
    # every style's fast engine, one step at a time in a low-priority process; "convert" only converts;
    # "off" does nothing (each style converts on first use and runs its plain engine).
    background: str = "all"
    background_nice: int = 19  # CPU priority of that process (19: only what paints leave over)

    # Picture defaults.
    default_style: str = "v3-hayao"  # falls back to an offered style in commercial-only mode
    # Offer only styles whose weights' licence allows commercial use; every other style is refused.
    commercial_only: bool = False
    max_side: int = 512  # long-side cap (within options.MAX_SIDE_RANGE); 0 / None at call time: full resolution
    tile_size: int = 512  # tile edge for full-resolution painting
    tile_overlap: int = 64  # overlap blended between tiles
    # Full resolution: "strips" runs the network layer by layer in row strips with the whole picture's norm
    # statistics (identical to one untiled pass, activations in temporary files); "tiles" paints independent
    # blended tiles (each tile normalises with its own statistics). "exact" is accepted as another name for strips.
    large_mode: str = "strips"
    scratch_dir: Path | None = None  # where the strips keep their activation files; default: the system temp dir

    # Engine.
    backend: str = "auto"  # auto | torch | compiled | onnxruntime | int8 | strips
    threads: int = 0  # intra-op threads per job; 0 = physical cores / jobs
    jobs: int = 1  # concurrent paints per process

    # Faces.
    faces: bool = True
    face_score_threshold: float = 0.7
    face_min_size: int = 24  # face width in source pixels; smaller faces have no detail to restyle
    face_size: int = 512  # working size of the aligned face crop
    face_cache_size: int = 256
    face_cache_ttl: float = 3600.0
    face_detect_max_side: int = 1024  # detector runs on a copy no larger than this
    portrait_face_style: str = "v3-jp-face"  # the face model portrait mode paints each face with

    # Service.
    host: str = "127.0.0.1"
    port: int = 8000
    queue_size: int = 8
    request_timeout: float = 120.0  # how long /predict waits for its turn and its paint
    result_ttl: float = 3600.0
    max_upload_bytes: int = 20 * 1024 * 1024
    max_pixels: int = 40_000_000
    # Video jobs (/api/jobs): the upload, its length and its frames' size before the cap. Celery keeps an upload in
    # Redis until a worker takes it, so Redis needs about queue_size × video_max_bytes of memory to spare.
    video_max_bytes: int = 64 * 1024 * 1024
    video_max_seconds: float = 60.0
    video_max_pixels: int = 3840 * 2160
    data_dir: Path | None = None  # job results; default <home>/jobs
    broker_url: str = ""  # empty: embedded queue in this process; redis://... : Celery workers
    redelivery_timeout: int = 900  # seconds before a job held by a vanished worker is handed to another
    log_level: str = "info"
    full_max_pixels: int = 16_777_216  # largest picture painted at full resolution (4096²); 0 = max_pixels
    scratch_reserve_bytes: int = 1 << 30  # full-resolution work starts only if this much scratch space stays free
    shutdown_grace: float = 60.0  # seconds a stopping server lets running paints finish
    header_timeout: float = 10.0  # seconds a client may take to send a request's headers
    body_timeout: float = 15.0  # seconds a client may pause while sending a body
    max_uploads: int = 16  # request bodies read at once; more are answered 503 before reading
    metrics_allow: str = ""  # client addresses/networks allowed to read /metrics, comma-separated; empty = all
    cors_origins: str = ""  # origins allowed to call the API from a browser, comma-separated; empty = none
    api_keys: str = ""  # comma-separated keys, or a file of keys (one a line); empty = no keys needed
    key_rate: int = 60  # requests per key per minute
    key_jobs: int = 4  # jobs per key queued or running at once

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
