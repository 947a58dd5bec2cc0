"""A fake camera for headless Chromium: a real clip written as the .y4m file that Chromium's fake capture device
plays in a loop (``--use-file-for-fake-video-capture``), for the live camera's tests and benchmark."""

from __future__ import annotations

from pathlib import Path

import numpy as np

# Chromium's fake camera and microphone; the "fake UI" answers every permission prompt with yes.
FAKE_MEDIA = ["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"]


def fake_camera_file(clip: Path, dst: Path, width: int = 320, height: int = 240, seconds: float = 3.0) -> Path:
    """The first ``seconds`` of ``clip``, its centre cropped to ``width``:``height`` and scaled to that size, as an
    uncompressed YUV 4:2:0 .y4m at the clip's frame rate (at most 30)."""
    import av
    from PIL import Image

    with av.open(str(clip)) as container:
        stream = container.streams.video[0]
        rate = float(stream.average_rate or 30)
        fps = min(30, round(rate))
        frames = []
        for frame in container.decode(video=0):
            if len(frames) >= seconds * rate:
                break
            frames.append(frame.to_image())
    step = rate / fps
    picked = [frames[int(i * step)] for i in range(int(len(frames) / step))]
    with dst.open("wb") as out:
        out.write(f"YUV4MPEG2 W{width} H{height} F{fps}:1 Ip A1:1 C420jpeg\n".encode())
        for img in picked:
            w, h = img.size
            scale = min(w / width, h / height)
            cw, ch = width * scale, height * scale
            box = ((w - cw) / 2, (h - ch) / 2, (w + cw) / 2, (h + ch) / 2)
            small = img.resize((width, height), Image.Resampling.BILINEAR, box=box)
            yuv = av.VideoFrame.from_ndarray(np.asarray(small.convert("RGB")), format="rgb24").reformat(
                format="yuv420p")
            out.write(b"FRAME\n" + np.ascontiguousarray(yuv.to_ndarray()).tobytes())
    return dst
