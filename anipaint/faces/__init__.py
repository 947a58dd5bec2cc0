"""Pipeline step 4, faces: detect, align, restyle, blend.

A picture painted at a 512 px cap leaves the faces of a group photo ~60 px wide, too small for the generator
to draw eyes and mouths. So each face is detected (:mod:`.detect`, YuNet in ONNX Runtime: :mod:`.yunet`),
aligned FFHQ-style out of the FULL-RESOLUTION source (:mod:`.align`), painted on its own by a callable the Painter
passes in and blended back (:mod:`.blend`: the picture's own style, colour-matched, through a feathered ellipse;
:mod:`.portrait`: the anime face model, inside the person's segmentation).
"""

from anipaint.faces.align import Face, align_face
from anipaint.faces.blend import enhance_faces, face_mask
from anipaint.faces.detect import FaceDetector, get_face_detector

__all__ = ["Face", "FaceDetector", "align_face", "enhance_faces", "face_mask", "get_face_detector"]
