"""Videos: decode each frame, paint it, encode H.264 at the source frame rate, and carry the audio over.

PyAV (FFmpeg) does the container work, so every format FFmpeg reads is accepted; frames go through the same
painter as single pictures (cap, faces) so a video looks like its stills.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np

from anipaint.errors import ImageError, OptionError
from anipaint.options import PaintOptions

VIDEO_SUFFIXES = {".mp4", ".mov", ".mkv", ".webm", ".avi", ".m4v"}


def is_video(path: Path) -> bool:
    return Path(path).suffix.lower() in VIDEO_SUFFIXES


def paint_video(
    painter,
    src: Path,
    dst: Path,
    options: PaintOptions | None = None,
    *,
    on_frame: Callable[[int, int], None] | None = None,
) -> dict:
    """Paint every frame of ``src`` into ``dst`` (.mp4) with ``options`` (faces are off unless asked for: a face
    pass per frame costs time and can flicker). Returns {"frames", "fps", "width", "height"}.

    ``on_frame(done, total)`` reports progress (total is 0 when the container does not say).
    """
    import av

    asked = options or PaintOptions()
    if asked.portrait or asked.background:
        raise OptionError("portrait mode and a background style paint pictures, not videos")
    options = replace(asked.settled(painter.settings), faces=asked.faces is True)

    try:
        container = av.open(str(src))
    except (av.FFmpegError, OSError) as exc:
        raise ImageError(f"{src}: not a video we can read ({exc})") from None
    with container:
        if not container.streams.video:
            raise ImageError(f"{src}: has no video stream")
        vin = container.streams.video[0]
        vin.thread_type = "AUTO"
        ain = container.streams.audio[0] if container.streams.audio else None
        rate = vin.average_rate or Fraction(25, 1)
        total = vin.frames or 0
        dst.parent.mkdir(parents=True, exist_ok=True)
        from anipaint.preprocess import fit_long_side

        # Every stream must exist before the first packet is written, so the output size is worked out now.
        size = fit_long_side(vin.codec_context.width, vin.codec_context.height, options.max_side)
        with av.open(str(dst), mode="w") as out:
            vout = _open_video_stream(out, rate, size)
            aout = out.add_stream_from_template(ain) if ain is not None else None
            done = 0
            streams = [vin] + ([ain] if ain is not None else [])
            for packet in container.demux(*streams):
                if packet.stream is ain and aout is not None:
                    if packet.dts is None:
                        continue
                    packet.stream = aout
                    out.mux(packet)
                    continue
                for frame in packet.decode():
                    painted = painter.paint(frame.to_image(), options)
                    arr = _even(np.asarray(painted.convert("RGB")))
                    for p in vout.encode(av.VideoFrame.from_ndarray(arr, format="rgb24")):
                        out.mux(p)
                    done += 1
                    if on_frame:
                        on_frame(done, total)
            if done == 0:
                raise ImageError(f"{src}: the video has no frames")
            for p in vout.encode():
                out.mux(p)
    return {"frames": done, "fps": float(rate), "width": vout.width, "height": vout.height}


def _open_video_stream(out, rate: Fraction, size: tuple[int, int]):
    stream = out.add_stream("libx264", rate=rate)
    # yuv420p needs even sides; players expect it.
    stream.width, stream.height = size[0] - size[0] % 2, size[1] - size[1] % 2
    stream.pix_fmt = "yuv420p"
    stream.options = {"crf": "18", "preset": "medium"}
    return stream


def _even(arr: np.ndarray) -> np.ndarray:
    h, w = arr.shape[:2]
    return np.ascontiguousarray(arr[: h - h % 2, : w - w % 2])
