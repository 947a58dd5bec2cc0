"""``anipaint convert``: a picture, an animated picture, a video, a folder of them, or a folder watched for new ones.

Each file goes by what it is (:func:`kind_of`), and its painted copy is named by :func:`output_path`. Progress goes
to stderr as a tqdm bar, the one-line result per file to stdout, and errors are :class:`AnipaintError` for the
CLI to print as one line.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from anipaint import imaging
from anipaint.errors import AnipaintError
from anipaint.media import animation, video
from anipaint.options import PaintOptions
from anipaint.settings import Settings

if TYPE_CHECKING:
    from anipaint.painter import Painter

Kind = Literal["picture", "animation", "video"]


def kind_of(path: Path) -> Kind | None:
    """What a file is by its name and, for pictures that may move, its frames; None for anything else."""
    if video.is_video(path):
        return "video"
    if path.suffix.lower() not in imaging.SUFFIXES:
        return None
    return "animation" if animation.is_animated(path) else "picture"


def output_path(src: Path, folder: Path) -> Path:
    """Where a file's painted copy goes in ``folder``: a video as .mp4, an animated picture in its own format, a
    picture as .png."""
    kind = kind_of(src)
    suffix = {"video": ".mp4", "animation": src.suffix.lower()}.get(kind or "picture", ".png")
    return folder / (src.stem + suffix)


def convert(src: Path, dst: Path, asked: PaintOptions, settings: Settings, *, watch: bool = False) -> int:
    """The verb: returns the exit code."""
    from anipaint.models import availability

    # What can be refused from the arguments alone is refused before the painter loads (torch takes seconds).
    availability.resolve(asked.style, settings)
    if not src.exists():
        raise AnipaintError(f"{src}: no such file or folder")
    if src.is_file() and (kind_of(src) or "picture") == "picture":
        imaging.probe_image(src)
    from anipaint.painter import get_painter

    painter = get_painter(asked.style, settings)
    if watch:
        from anipaint.cli.watch import watch_folder

        if not src.is_dir():
            raise AnipaintError(f"{src}: --watch needs a folder to watch")
        return watch_folder(src, dst, lambda path, folder: convert_file(painter, path, folder, asked, bars=False),
                            wanted=lambda path: kind_of(path) is not None)
    if src.is_dir():
        return _convert_folder(painter, src, dst, asked)
    convert_file(painter, src, dst, asked)
    return 0


def convert_file(painter: Painter, src: Path, dst: Path, asked: PaintOptions, *, bars: bool = True) -> Path:
    """Paint one file into ``dst`` (a file, or a folder to put it in); prints one line; returns the output path."""
    kind = kind_of(src) or "picture"  # an unknown suffix is tried as a picture, for a clear "not a picture" error
    if dst.is_dir():
        dst = output_path(src, dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if kind == "picture":
        line = _convert_picture(painter, src, dst, asked, bars)
    else:
        line = _convert_moving(painter, src, dst, asked, kind, bars)
    print(f"{src} → {dst} ({painter.style.id}{line}, {time.perf_counter() - start:.1f} s)", flush=True)
    return dst


def _convert_picture(painter: Painter, src: Path, dst: Path, asked: PaintOptions, bars: bool) -> str:
    from tqdm import tqdm

    # A full-resolution paint can take a minute: a bar appears if it takes more than two seconds.
    with tqdm(total=100, desc=f"painting ({painter.style.id})", unit="%", file=sys.stderr, delay=2, disable=not bars,
              bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining} {postfix}") as bar:

        def report(stage: str, fraction: float) -> None:
            bar.set_postfix_str(stage, refresh=False)
            bar.update(max(0, round(100 * fraction) - bar.n))

        painted = painter.paint_result(src, asked, progress=report)
    result = painted.image
    imaging.save_image(result, dst)
    mode = f", portrait: {painted.faces_found} face(s)" if asked.portrait or painter.style.paints_faces_only else ""
    return f"{mode}, {result.width}×{result.height}"


def _convert_moving(painter: Painter, src: Path, dst: Path, asked: PaintOptions, kind: Kind, bars: bool) -> str:
    from tqdm import tqdm

    painter.warm()
    with tqdm(desc=f"painting frames ({painter.style.id})", unit="frame", file=sys.stderr, disable=not bars) as bar:

        def advance(done: int, total: int) -> None:
            bar.total = total or None
            bar.update(done - bar.n)

        paint = video.paint_video if kind == "video" else animation.paint_animation
        facts = paint(painter, src, dst, asked, on_frame=advance)
    steady = "" if facts["temporal"] else ", frame by frame"
    return f", {facts['frames']} frames{steady}, {facts['width']}×{facts['height']}"


def _convert_folder(painter: Painter, src: Path, dst: Path, asked: PaintOptions) -> int:
    from tqdm import tqdm

    files = sorted(p for p in src.rglob("*") if p.is_file() and kind_of(p) is not None)
    if not files:
        raise AnipaintError(f"{src}: no pictures or videos found ({', '.join(imaging.SUFFIXES)}, "
                            f"{', '.join(sorted(video.VIDEO_SUFFIXES))})")
    dst.mkdir(parents=True, exist_ok=True)
    failed: list[tuple[Path, str]] = []
    start = time.perf_counter()
    painter.warm()
    for path in tqdm(files, desc=f"painting ({painter.style.id})", unit="file", file=sys.stderr):
        out = output_path(path, dst / path.relative_to(src).parent)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            if kind_of(path) == "picture":
                imaging.save_image(painter.paint(path, asked), out)
            else:
                convert_file(painter, path, out, asked, bars=False)
        except AnipaintError as exc:
            failed.append((path, str(exc)))
    elapsed = time.perf_counter() - start
    done = len(files) - len(failed)
    print(f"{done} of {len(files)} files painted into {dst} in {elapsed:.1f} s", file=sys.stderr)
    for path, reason in failed:
        print(f"  failed: {path}: {reason}", file=sys.stderr)
    return 1 if failed else 0
