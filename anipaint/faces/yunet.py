"""YuNet, the face detector's network, run by ONNX Runtime and decoded as OpenCV's ``cv2.FaceDetectorYN`` does.

ONNX Runtime runs the network about twice as fast as OpenCV's DNN module here (the 900 px group photo ~14 ms
against ~27 ms, a 256 px refinement crop ~2 ms against ~3.4 ms), and detection is a third of what the face
pass adds to a picture. What OpenCV does around the network is kept as it is (its ``FaceDetectorYN::detect``):
the BGR picture padded with zeros at the bottom and right to a multiple of 32 and fed as 0..255 floats; per stride
(8, 16, 32) a grid of priors, each giving a score ``sqrt(cls · obj)``, a box (centre offset in cells, log size)
and five landmarks (offsets in cells); then non-maximum suppression on integer boxes. ``tests/faces/test_faces.py``
holds the rows to OpenCV's own on real photos.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort

STRIDES = (8, 16, 32)
_PAD = 32  # YuNet's input is padded to a multiple of its largest stride


class YuNet:
    """``detect(bgr) -> (N, 15)`` float32 rows: x, y, w, h, five landmarks (x, y), score; as ``FaceDetectorYN``.
    One session serves every thread (ONNX Runtime's ``run`` is thread-safe and the input size is per call)."""

    def __init__(self, model_path: Path, score_threshold: float, nms_threshold: float = 0.3, top_k: int = 5000):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(1, cv2.getNumThreads())  # the threads OpenCV's detector would use
        opts.inter_op_num_threads = 1
        # Threads spinning after a detection would take the cores from the painter that runs next.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(model_path), opts, providers=["CPUExecutionProvider"])
        spec = self._session.get_inputs()[0]
        self._input = spec.name
        # The published fixed-size file takes 640x640 only; pictures are letterboxed into it (FaceDetector).
        self.fixed_side = spec.shape[-1] if all(isinstance(d, int) for d in spec.shape[-2:]) else None
        self._outputs = [f"{kind}_{s}" for kind in ("cls", "obj", "bbox", "kps") for s in STRIDES]
        self.score_threshold, self.nms_threshold, self.top_k = float(score_threshold), float(nms_threshold), top_k

    def detect(self, bgr: np.ndarray) -> np.ndarray:
        h, w = bgr.shape[:2]
        ph, pw = -(-h // _PAD) * _PAD, -(-w // _PAD) * _PAD
        blob = np.zeros((1, 3, ph, pw), np.float32)
        blob[0, :, :h, :w] = bgr.transpose(2, 0, 1)
        outs = dict(zip(self._outputs, self._session.run(self._outputs, {self._input: blob}), strict=True))
        faces = np.concatenate([self._decode(outs, s, ph // s, pw // s) for s in STRIDES])
        if len(faces) > 1:
            boxes = [[int(x), int(y), int(bw), int(bh)] for x, y, bw, bh in faces[:, :4]]
            keep = cv2.dnn.NMSBoxes(boxes, faces[:, 14].tolist(), self.score_threshold, self.nms_threshold,
                                    1.0, self.top_k)
            faces = faces[np.asarray(keep, np.int64).reshape(-1)]
        return faces

    def _decode(self, outs: dict[str, np.ndarray], stride: int, rows: int, cols: int) -> np.ndarray:
        cls = np.clip(outs[f"cls_{stride}"].reshape(-1), 0, 1)
        obj = np.clip(outs[f"obj_{stride}"].reshape(-1), 0, 1)
        score = np.sqrt(cls * obj)
        keep = np.flatnonzero(score >= self.score_threshold)
        r, c = (keep // cols).astype(np.float32), (keep % cols).astype(np.float32)
        box = outs[f"bbox_{stride}"].reshape(-1, 4)[keep]
        kps = outs[f"kps_{stride}"].reshape(-1, 10)[keep]
        bw, bh = np.exp(box[:, 2]) * stride, np.exp(box[:, 3]) * stride
        cx, cy = (c + box[:, 0]) * stride, (r + box[:, 1]) * stride
        out = np.empty((len(keep), 15), np.float32)
        out[:, 0], out[:, 1], out[:, 2], out[:, 3] = cx - bw / 2, cy - bh / 2, bw, bh
        out[:, 4:14:2] = (kps[:, 0::2] + c[:, None]) * stride
        out[:, 5:14:2] = (kps[:, 1::2] + r[:, None]) * stride
        out[:, 14] = score[keep]
        return out
