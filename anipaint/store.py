"""The model store: original sources in, converted artefacts out.

Layout under ``settings.home``::

    models/<style-id>/model.pt                the converted artefact (a state dict, or the graph IR)
    models/<style-id>/meta.json               source checksums + converter version it was built from
    models/face/yunet.onnx                    the face detector
    downloads/<source path>                   files fetched by `anipaint models fetch`

``prepare`` is idempotent (an artefact whose meta matches its sources is kept) and safe when several processes
run it at once: each style is converted under a file lock into a temporary folder that is renamed into place.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from anipaint import downloads, importers
from anipaint.downloads import sha256_file
from anipaint.errors import LicenceError, ModelStoreError, StyleError
from anipaint.registry import (
    EXTRA_SOURCES,
    FACE_DETECTOR,
    SEGMENTER,
    SEGMENTER_IMPORTER,
    Source,
    Style,
    all_styles,
    candidates,
    get_style,
)
from anipaint.settings import Settings, get_settings
from anipaint.sources import downloadable, fetch_source, locate_source

# Bump when the store's layout changes. Converter *code* changes are caught by converter_digest() below.
FORMAT_VERSION = 1
ARTEFACT = "model.pt"  # the converted file's name in a style's folder, for every architecture
# The code an artefact's content depends on: an artefact converted by other code is stale and is rebuilt
# (an upgrade once left a v3 artefact that the new graph runner couldn't execute).
_CONVERTER_CODE = ("importers", "networks")


@functools.lru_cache(maxsize=1)
def converter_digest() -> str:
    """16 hex digits of the importer and network modules' source: part of every artefact's meta."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for folder in _CONVERTER_CODE:
        for path in sorted((package / folder).glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class StyleStatus:
    style: Style
    available: bool  # prepared, or its sources are present and can be converted on first use
    prepared: bool
    reason: str | None = None  # why not available


def _settings(settings: Settings | None) -> Settings:
    return settings if settings is not None else get_settings()


def style_dir(style: Style, settings: Settings | None = None) -> Path:
    return _settings(settings).models_dir / style.id


def artefact_path(style: Style, settings: Settings | None = None) -> Path:
    return style_dir(style, settings) / ARTEFACT


def face_detector_path(settings: Settings | None = None) -> Path:
    return _settings(settings).models_dir / "face" / "yunet.onnx"


def _expected_meta(style: Style, paths: list[Path]) -> dict:
    return {
        "style": style.id,
        "format_version": FORMAT_VERSION,
        "converter": converter_digest(),
        "sources": {src.path: sha256_file(p) for src, p in zip(style.sources, paths, strict=True)},
    }


def _read_meta(folder: Path) -> dict | None:
    try:
        return json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return None


def is_prepared(style: Style, settings: Settings | None = None) -> bool:
    meta = _read_meta(style_dir(style, settings))
    return (
        bool(meta)
        and meta.get("format_version") == FORMAT_VERSION
        and meta.get("converter") == converter_digest()
        and artefact_path(style, settings).is_file()
    )


def _verified_sources(style: Style, settings: Settings) -> list[Path]:
    paths: list[Path] = []
    for src in style.sources:
        path = locate_source(src, settings)
        if path is None:
            hint = f"; run `anipaint models fetch {style.id}`" if src.url else ""
            raise ModelStoreError(f"{style.id}: source file {src.path} not found in {settings.sources}{hint}")
        if src.sha256 is not None:
            actual = sha256_file(path)
            if actual != src.sha256:
                raise ModelStoreError(
                    f"{style.id}: checksum mismatch for {path} (expected {src.sha256[:12]}…, got {actual[:12]}…)"
                )
        paths.append(path)
    return paths


def offered(style: Style, settings: Settings | None = None) -> bool:
    """Whether this installation offers the style at all (commercial-only mode hides non-commercial weights)."""
    return style.licence.commercial or not _settings(settings).commercial_only


def refuse_unoffered(style: Style, settings: Settings | None = None) -> None:
    """Raise the one refusal every front end shows for a style its licence keeps out of commercial-only mode."""
    if not offered(style, settings):
        raise LicenceError(
            f"style {style.id!r} is refused: its licence ({style.licence.id}) does not allow commercial use, and "
            "this installation offers only styles cleared for commercial use (commercial-only mode)"
        )


def _usable(style: Style, s: Settings) -> bool:
    """Prepared, its sources are here, or it downloads on first use."""
    if is_prepared(style, s) or all(locate_source(src, s) for src in style.sources):
        return True
    return s.auto_fetch and downloadable(style, s)


def style_status(settings: Settings | None = None) -> list[StyleStatus]:
    """Every style this installation offers, with whether it can be used here, and why not."""
    s = _settings(settings)
    out: list[StyleStatus] = []
    for style in all_styles():
        if not offered(style, s):
            continue
        if is_prepared(style, s):
            out.append(StyleStatus(style, True, True))
            continue
        missing = [src.path for src in style.sources if locate_source(src, s) is None]
        if missing and s.auto_fetch and downloadable(style, s):
            out.append(StyleStatus(style, True, False, "downloads on first use (ANIPAINT_AUTO_FETCH)"))
        elif missing:
            how = f" (`anipaint models fetch {style.id}`)" if downloadable(style, s) else ""
            out.append(StyleStatus(style, False, False, f"source missing: {', '.join(missing)}{how}"))
        else:
            out.append(StyleStatus(style, True, False, None))
    return out


def resolve(name: str | None, settings: Settings | None = None) -> Style:
    """A style id or alias (None: the default style) → the best style available here.

    Raises StyleError, or LicenceError for a style that commercial-only mode refuses. In that mode the default
    style falls back to the first offered style available here."""
    s = _settings(settings)
    ids = candidates(name or s.default_style)
    allowed = [get_style(i) for i in ids if offered(get_style(i), s)]
    if not allowed and name:
        refuse_unoffered(get_style(ids[0]), s)
    for style in allowed:
        if _usable(style, s):
            return style
    if not name and s.commercial_only:
        for style in all_styles():
            if offered(style, s) and _usable(style, s):
                return style
        raise LicenceError(
            "no style available here is cleared for commercial use (commercial-only mode); "
            "see `anipaint styles` and the README's licence table"
        )
    raise StyleError(f"style {name!r} is not available here (tried {', '.join(ids)}); see `anipaint styles`")


def prepare_style(style: Style, settings: Settings | None = None, *, force: bool = False) -> dict:
    """Convert one style into the store unless an up-to-date artefact is there. Returns its meta."""
    s = _settings(settings)
    s.models_dir.mkdir(parents=True, exist_ok=True)
    paths = _verified_sources(style, s)
    target = style_dir(style, s)
    with FileLock(str(s.models_dir / f".{style.id}.lock")):
        expected = _expected_meta(style, paths)
        meta = _read_meta(target)
        if not force and meta and all(meta.get(k) == v for k, v in expected.items()) and is_prepared(style, s):
            return meta
        work = Path(tempfile.mkdtemp(prefix=f".{style.id}-", dir=s.models_dir))
        try:
            try:
                facts = importers.convert(style.importer, paths, work)
            except ModelStoreError:
                raise
            except Exception as exc:  # a converter failure names the style and the file, not a traceback
                raise ModelStoreError(f"{style.id}: conversion failed: {exc}") from exc
            meta = {**expected, **(facts or {})}
            (work / "meta.json").write_text(json.dumps(meta, indent=2, default=str))
            if (target / "engine").is_dir():  # compiled builds are keyed by the artefact's checksum: keep them
                os.replace(target / "engine", work / "engine")
            if target.exists():
                shutil.rmtree(target)
            os.replace(work, target)
        finally:
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)
        return meta


def prepare_face_detector(settings: Settings | None = None) -> Path | None:
    s = _settings(settings)
    dest = face_detector_path(s)
    if dest.is_file():
        return dest
    src = locate_source(FACE_DETECTOR, s)
    if src is None or sha256_file(src) != FACE_DETECTOR.sha256:
        return None
    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(s.models_dir / ".face.lock")):
        if not dest.is_file():
            tmp = dest.with_suffix(f".{os.getpid()}.tmp")
            shutil.copyfile(src, tmp)
            os.replace(tmp, dest)
    return dest


def segmenter_path(settings: Settings | None = None) -> Path:
    return _settings(settings).models_dir / "segmenter" / "model.pt"


def prepare_segmenter(settings: Settings | None = None) -> Path | None:
    """The person segmenter as a graph artefact, converted on first use and again when the converter code
    changes; None when its source is absent or fails its checksum."""
    s = _settings(settings)
    src = locate_source(SEGMENTER, s)
    if src is None or sha256_file(src) != SEGMENTER.sha256:
        return None
    dest = segmenter_path(s)
    stamp = {"format_version": FORMAT_VERSION, "converter": converter_digest(), "source": SEGMENTER.sha256}
    if dest.is_file() and _read_meta(dest.parent) == stamp:
        return dest
    s.models_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(s.models_dir / ".segmenter.lock")):
        if dest.is_file() and _read_meta(dest.parent) == stamp:
            return dest
        work = Path(tempfile.mkdtemp(prefix=".segmenter-", dir=s.models_dir))
        try:
            importers.convert(SEGMENTER_IMPORTER, [src], work)
            (work / "meta.json").write_text(json.dumps(stamp))
            shutil.rmtree(dest.parent, ignore_errors=True)
            os.replace(work, dest.parent)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return dest


def prepare(
    style_ids: Iterable[str] | None = None,
    settings: Settings | None = None,
    *,
    force: bool = False,
    on_result: Callable[[str, str, str], None] | None = None,
) -> dict[str, str]:
    """Convert every available source (or the given styles). Returns {style id: 'ok' | 'skipped: why' | 'failed: why'}.

    A missing source is skipped, not an error; a bad checksum or a failed conversion is reported as failed.
    """
    s = _settings(settings)
    chosen = [get_style(i) for i in style_ids] if style_ids else list(all_styles())
    results: dict[str, str] = {}
    for style in chosen:
        if any(locate_source(src, s) is None for src in style.sources):
            outcome, detail = "skipped", "source missing"
        else:
            try:
                prepare_style(style, s, force=force)
                outcome, detail = "ok", ""
            except ModelStoreError as exc:
                outcome, detail = "failed", str(exc)
        results[style.id] = outcome if not detail else f"{outcome}: {detail}"
        if on_result:
            on_result(style.id, outcome, detail)
    detector = prepare_face_detector(s)
    results["face-detector"] = "ok" if detector else "skipped: source missing"
    results["segmenter"] = "ok" if prepare_segmenter(s) else "skipped: source missing"
    return results


def ensure_prepared(style: Style, settings: Settings | None = None) -> Path:
    """The artefact for a style, converting it (and with ``auto_fetch``, downloading it) on first use."""
    s = _settings(settings)
    if not is_prepared(style, s):
        if s.auto_fetch and any(locate_source(src, s) is None for src in style.sources):
            fetch_style(style, s)
        prepare_style(style, s)
    return artefact_path(style, settings)


def fetch_style(style: Style, settings: Settings | None = None, *, url: str | None = None,
                timeout: float = 60.0, progress: Callable[[Source], downloads.Progress | None] | None = None,
                convert: bool = False) -> list[Path]:
    """Every source file of a style (see :func:`fetch_source`). Files without a published checksum are only
    trusted once they convert, so their style is converted now (``convert`` converts any style); a file that
    does not convert is deleted again, so a wrong file never makes a style look available."""
    s = _settings(settings)
    if url is not None and len(style.sources) != 1:
        raise ModelStoreError(f"{style.id} is built from {len(style.sources)} files; one --url can't name them")
    paths = [fetch_source(src, s, url=url, timeout=timeout, progress=progress(src) if progress else None)
             for src in style.sources]
    if convert or any(src.sha256 is None for src in style.sources):
        try:
            prepare_style(style, s, force=url is not None)
        except ModelStoreError:
            for src, path in zip(style.sources, paths, strict=True):
                if src.sha256 is None and path.is_relative_to(s.home / "downloads"):
                    path.unlink(missing_ok=True)
            raise
    return paths


def fetch(names: Iterable[str] | None = None, settings: Settings | None = None, *, timeout: float = 60.0,
          progress: Callable[[Source], downloads.Progress | None] | None = None,
          on_result: Callable[[str, str], None] | None = None) -> dict[str, str]:
    """Download the given styles' files (none given: every style, the face detector and the other models).
    Returns {name: 'ok' | 'failed: why'}; one failure doesn't stop the rest."""
    s = _settings(settings)
    jobs: list[tuple[str, Callable[[], object]]] = []
    for style in [get_style(n) for n in candidates_ids(names)] if names else all_styles():
        jobs.append((style.id, functools.partial(fetch_style, style, s, timeout=timeout, progress=progress)))
    if not names:
        for name, source in EXTRA_SOURCES.items():
            jobs.append((name, functools.partial(fetch_source, source, s, timeout=timeout,
                                                 progress=progress(source) if progress else None)))
    results: dict[str, str] = {}
    for name, job in jobs:
        try:
            job()
            results[name] = "ok"
        except ModelStoreError as exc:
            results[name] = f"failed: {exc}"
        if on_result:
            on_result(name, results[name])
    return results


def candidates_ids(names: Iterable[str]) -> list[str]:
    """Style ids for user-given names: an alias means its first candidate."""
    return [candidates(n)[0] for n in names]


def add_local(style_id: str, path: Path, settings: Settings | None = None) -> Path:
    """Use a file the user already has (e.g. the port's ``face_paint_512_v2.pt``) as a style's source.

    The file is copied next to the downloads (atomically) and converted; a file that does not convert is
    removed again, so a wrong file never makes a style look available.
    """
    s = _settings(settings)
    style = get_style(style_id)
    if len(style.sources) != 1:
        raise ModelStoreError(f"{style.id} is built from {len(style.sources)} files; put them in {s.sources}")
    src = Path(path).expanduser()
    if not src.is_file():
        raise ModelStoreError(f"{src}: no such file")
    source = style.sources[0]
    if source.sha256 is not None and sha256_file(src) != source.sha256:
        raise ModelStoreError(f"{src} is not the {style.id} source file (checksum differs)")
    dest = s.home / "downloads" / source.path
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dest)
    try:
        prepare_style(style, s, force=True)
    except ModelStoreError:
        dest.unlink(missing_ok=True)
        raise
    return dest
