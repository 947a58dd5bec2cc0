"""Video and animated-picture jobs: what the upload is, whether it is within this server's limits, and painting it.

A clip is an MP4/MOV/WebM video or an animated GIF/WebP/APNG. It goes through ``/api/jobs`` only (a clip takes
longer than ``/predict`` should wait), painted by the library's :func:`~anipaint.media.video.paint_video` or
:func:`~anipaint.media.animation.paint_animation` with the same options as a picture, steady along the motion unless
``temporal`` is off. The result is an MP4 with the sound, or the animated picture in its own format.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from anipaint import imaging
from anipaint.errors import ImageTooLargeError
from anipaint.media import animation, video
from anipaint.options import PaintOptions
from anipaint.service.uploads import UploadData, head, megabytes, rewound, size_of, write_into
from anipaint.settings import Settings

ClipKind = Literal["video", "animation"]
FrameProgress = Callable[[int, int], None]

# The videos the page offers to choose (its file input's accept list and its hint; tests/pipeline/test_phone_formats.py
# holds index.html and i18n.js to these): the containers looks_like_video() recognises, as browsers name them.
# Animated GIF, WebP and APNG are pictures to a browser, so imaging.ACCEPT already lets them in.
VIDEO_FORMATS = (
    imaging.Format("MP4", "MP4", ("video/mp4",), (".mp4", ".m4v")),
    imaging.Format("MOV", "MOV", ("video/quicktime",), (".mov",)),
    imaging.Format("WEBM", "WebM", ("video/webm",), (".webm",)),
)
VIDEO_NAMES = ", ".join(f.label for f in VIDEO_FORMATS[:-1]) + " or " + VIDEO_FORMATS[-1].label
VIDEO_ACCEPT = ",".join([m for f in VIDEO_FORMATS for m in f.mime_types]
                        + [x for f in VIDEO_FORMATS for x in f.suffixes])


@dataclass(frozen=True)
class PaintedClip:
    data: bytes
    media_type: str
    width: int
    height: int
    frames: int


def clip_of(data: UploadData) -> ClipKind | None:
    """What an upload is, by its bytes: "video", "animation", or None for a still picture (or anything else)."""
    if video.looks_like_video(head(data)):
        return "video"
    return "animation" if animation.is_animated(data) else None


def check_clip(data: UploadData, s: Settings) -> None:
    """ImageTooLargeError naming the limit a clip is over (the API's 413), or ImageError when it cannot be read.
    Checked once, when the job is admitted, from the spooled upload (only its headers are read)."""
    if size_of(data) > s.video_max_bytes:
        raise ImageTooLargeError(f"the video is larger than the {megabytes(s.video_max_bytes)} limit for videos")
    if clip_of(data) == "animation":
        frames = animation.frame_count(data)
        width, height, _ = imaging.probe_image(rewound(data))
        try:
            imaging.check_limits(width, height * frames, s.max_pixels)
        except ImageTooLargeError:
            raise ImageTooLargeError(f"the animation's {frames} frames of {width}×{height} are more than the "
                                     f"{s.max_pixels / 1e6:.0f} MP limit for all frames together") from None
        return
    facts = video.probe_video(data)
    if facts.seconds > s.video_max_seconds:
        raise ImageTooLargeError(f"the video is {facts.seconds:.1f} s long; the limit here is "
                                 f"{s.video_max_seconds:g} s")
    if facts.width * facts.height > s.video_max_pixels:
        raise ImageTooLargeError(f"the video's frames are {facts.width}×{facts.height}; the limit here is "
                                 f"{s.video_max_pixels / 1e6:.1f} MP a frame")


def paint_clip(painter, data: UploadData, options: PaintOptions, s: Settings, on_frame: FrameProgress) -> PaintedClip:
    """Paint a clip upload (admitted by :func:`check_clip`) in a temporary folder of the scratch space."""
    from anipaint.engine.strips import scratch

    container = video.looks_like_video(head(data))
    folder = scratch.location(s)
    folder.mkdir(parents=True, exist_ok=True)
    # Named like the strips' per-paint folders, so that a crash's leftovers are swept at the next start.
    with tempfile.TemporaryDirectory(prefix=f"anipaint-strips-{os.getpid()}-clip-", dir=folder) as tmp:
        src = Path(tmp) / f"input.{container or 'anim'}"
        with open(src, "wb") as fh:
            write_into(fh, data)
        if container:
            dst = Path(tmp) / "painted.mp4"
            facts = video.paint_video(painter, src, dst, options, on_frame=on_frame)
            media_type = "video/mp4"
        else:
            import PIL.Image

            with PIL.Image.open(src) as img:
                suffix, media_type = animation.ANIMATED_FORMATS.get(img.format or "", animation.ANIMATED_FORMATS["GIF"])
            dst = Path(tmp) / f"painted{suffix}"
            facts = animation.paint_animation(painter, src, dst, options, on_frame=on_frame)
        return PaintedClip(dst.read_bytes(), media_type, facts["width"], facts["height"], facts["frames"])
