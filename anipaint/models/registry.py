"""The style table: one row per style, the only place that knows style ids, sources and licences.

Each style's ``licence`` is a row of the licence table (:mod:`anipaint.models.licences`): its id, terms and origin
decide whether a commercial-only installation offers the style (see :func:`anipaint.models.availability.resolve`).

A style's ``architecture`` names its row in the table of architectures (:mod:`anipaint.networks.architectures`:
how its network is built and run) and ``importer`` the converter that turns its source files into the model
store's artefact (:data:`anipaint.importers.CONVERTERS`).
"""

from __future__ import annotations

from dataclasses import dataclass

from anipaint.errors import UnknownStyleError
from anipaint.models.licences import (
    CARTOONGAN_LICENCE,
    PORT_LICENCE,
    V1_JS_LICENCE,
    V1_LICENCE,
    V2_LICENCE,
    V3_LICENCE,
    WHITEBOX_LICENCE,
    Licence,
)

CARTOONGAN = "mnicnc404/CartoonGan-tensorflow"
# The port's weights are not in the index of public files this project's origins were checked against, so this
# address follows the repository's main branch; its files have no published checksum (the converter checks them).
PORT_URL = "https://github.com/bryandlee/animegan2-pytorch/raw/main/weights/{name}.pt"


def github_file(repo: str, commit: str, path: str, *, lfs: bool = False) -> str:
    """A file's address in a public GitHub repository at a pinned commit (Git LFS files: its media address)."""
    host = "https://media.githubusercontent.com/media" if lfs else "https://raw.githubusercontent.com"
    return f"{host}/{repo}/{commit}/{path}"


# Where each file in the sources folder was published (see ../shared/models/README.md for what each one is).
# Every (commit, path) pair below was seen in a stored copy of that repository's history; ``sha256`` is still
# checked after every download, so an origin that serves other bytes is refused, never converted.
TERRYKY = "terryky/tflite_gles_app", "11bffd9751cec6e53f176b2386771a2f9db007ae"
TUANMJNH = "tuanmjnh/AnimeGANv3_Video", "9d1e5e9e3a2f54a3d6781880a4df1d996e842a7b"
ZEEBLAZE = "zeeblaze/meetig-AI-T", "d92dffa579c38637993901ce50e0ba399b08ed07"
ANIMEGAN_JS = "coolseaweed/AnimeGAN-js"
# The AnimeGAN-js models live in three copies in that repository (models/, build/models/, public/models/ at
# different commits); each file is pinned where its stored copy was found. The model.json files there match ours
# in length and content read back; the .bin shards are binary and were checked by path and commit only.
_V1_ORIGINS = {
    "hayao": (("7b9f1d8d8e612cd24e3154c557933e57dc5b8fb6", "models"),
              ("7b9f1d8d8e612cd24e3154c557933e57dc5b8fb6", "models")),
    "shinkai": (("426883dede82ba01dad78e474b83db3b89819df2", "public/models"),
                ("7b9f1d8d8e612cd24e3154c557933e57dc5b8fb6", "models")),
    "paprika": (("aab6c3c90515d8dbdbaa281f4548f1f02558697b", "build/models"),
                ("aab6c3c90515d8dbdbaa281f4548f1f02558697b", "build/models")),
    "charge": (("7b9f1d8d8e612cd24e3154c557933e57dc5b8fb6", "models"),
               ("aab6c3c90515d8dbdbaa281f4548f1f02558697b", "build/models")),
    "iblard": (("aab6c3c90515d8dbdbaa281f4548f1f02558697b", "build/models"),
               ("426883dede82ba01dad78e474b83db3b89819df2", "public/models")),
    "strange_daddy": (("aab6c3c90515d8dbdbaa281f4548f1f02558697b", "build/models"),
                      ("426883dede82ba01dad78e474b83db3b89819df2", "public/models")),
}


def _v1_url(name: str, index: int) -> str:
    commit, folder = _V1_ORIGINS[name][index]
    file = ("model.json", "group1-shard1of1.bin")[index]
    return github_file(ANIMEGAN_JS, commit, f"{folder}/{name}/uint8/{file}")


@dataclass(frozen=True)
class Source:
    """One original file. ``path`` is relative to the sources folder (``ANIPAINT_SOURCES``)."""

    path: str
    sha256: str | None  # None: no published checksum; the importer validates the content instead
    url: str | None = None  # where `anipaint models fetch` downloads it from, if anywhere


@dataclass(frozen=True)
class Style:
    id: str
    label: str
    architecture: str  # a key of anipaint.networks.architectures.ARCHITECTURES
    importer: str  # a key of anipaint.importers.CONVERTERS
    sources: tuple[Source, ...]
    licence: Licence
    description: str = ""
    kind: str = "style"  # "style": paints whole pictures; "face": made for aligned face crops only
    # A face model: the (height, width) it paints of its 512 px aligned crop, the middle around the face (portrait
    # mode's window). The face keeps the crop's scale, which the model draws open eyes at; the margin it leaves
    # (background, shoulders) is what portrait mode's blend fades out anyway.
    paint_shape: tuple[int, int] | None = None

    @property
    def paints_faces_only(self) -> bool:
        """A face model: made for aligned face crops, so asked for a whole picture it restyles the faces in it,
        it cannot paint a background, and it is checked and timed on face crops."""
        return self.kind == "face"


def _v1(name: str, label: str, licence: Licence, description: str) -> Style:
    folder = f"animegan_v1/{name}"
    return Style(
        id=f"v1-{name.replace('_', '-')}",
        label=label,
        architecture="animeganv1",
        importer="tfjs_v1",
        sources=(
            Source(f"{folder}/model.json", _V1_SUMS[name][0], _v1_url(name, 0)),
            Source(f"{folder}/group1-shard1of1.bin", _V1_SUMS[name][1], _v1_url(name, 1)),
        ),
        licence=licence,
        description=description,
    )


def _cartoongan(name: str, label: str, description: str, sums: tuple[str, str, str, str]) -> Style:
    """A CartoonGAN light SavedModel folder: saved_model.pb first (the importer reads the folder it is in)."""
    folder = f"light_{name}_SavedModel"
    files = ("saved_model.pb", "variables/variables.index", "variables/variables.data-00000-of-00002",
             "variables/variables.data-00001-of-00002")
    # saved_model.pb was seen at one commit, the variables at another (the second data shard of paprika was not
    # seen at all; it is byte-identical to shinkai's, so its address is pinned at the same commit)
    commits = ("aaeec2ad87da7cba0bfffd96c26aea6f22c6de0d",) + ("d54080048497b8e8c21b36d739a79b325e6f9447",) * 3
    return Style(
        id=f"cartoongan-{name}",
        label=label,
        architecture="graph",
        importer="saved_model",
        sources=tuple(
            Source(f"cartoongan/{folder}/{f}", sha, github_file(CARTOONGAN, c, f"exported_models/{folder}/{f}"))
            for f, sha, c in zip(files, sums, commits, strict=True)
        ),
        licence=CARTOONGAN_LICENCE,
        description=description,
    )


def _port(name: str, label: str, description: str) -> Style:
    return Style(
        id=f"v2-{name.replace('_', '-')}",
        label=label,
        architecture="animeganv2-port",
        importer="torch_port",
        sources=(Source(f"animegan2-pytorch/{name}.pt", None, PORT_URL.format(name=name)),),
        licence=PORT_LICENCE,
        description=description,
    )


_V1_SUMS = {
    "hayao": (
        "09fdbb3ffceaa37f3d3ec49fb7dd778135bbdee1a1c520e7e04c531d636a93b1",
        "cdbbaec382a4e095f494d0e3d39a8013335ab383b68a268a04f90c366157fad9",
    ),
    "shinkai": (
        "1d829e8d396345ac0c694ab888793272f8c99775bde39cac57d783ab79bdcb86",
        "f2e72e7d454e1d68b972b63182333276c4528d79a604bb0d42e63ca68d8b9cf9",
    ),
    "paprika": (
        "6ada3403541f22a2b1c5f34591f078bb866b72c61d7e21e927a24af077e43ea1",
        "d82fc8eb53ec24a1be371c6dcfefb12a35fbb0c6349b51c236121450443fd703",
    ),
    "charge": (
        "0dd6d96476e05d49548f6fc900cae775d4a63ea474612e272b5aa328baf32108",
        "75f7be43c0bb9514fd108ff3449f531bf11bcfd8fe0d852aee45ee052e602895",
    ),
    "iblard": (
        "de782a72c345ddf377f7eacd00b823ec2e51b5a5a67bbf0209071614edbc5703",
        "9c513a68a81f7a07374dbd144ba2811eedaec6bd3a57fc207104c54c284aee3f",
    ),
    "strange_daddy": (
        "482a6b9924118afdee8e136c74c21fcc11d87e82ae4405fba5ab7751edaef4a6",
        "b429623ef150fec8daef87e7f46e4c058021cb764ad8bb1c08ee06abc6a96fbe",
    ),
}

STYLES: tuple[Style, ...] = (
    Style(
        id="v3-hayao",
        label="Hayao (AnimeGANv3)",
        architecture="graph",
        importer="tflite_graph",
        sources=(
            Source(
                "animeganv3/AnimeGANv3_Hayao_36_QUANTIZED_fp16.tflite",
                "53daf9b8da8350ac6e1c1171efdbb7bad55f7221c7d213925125841f83e52f35",
                github_file(*TUANMJNH, "resources/AnimeGANv3_Hayao_36_QUANTIZED_fp16.tflite"),
            ),
        ),
        licence=V3_LICENCE,
        description="Miyazaki-like colours; draws eyes and mouths on faces.",
    ),
    Style(
        id="v3-shinkai",
        label="Shinkai (AnimeGANv3)",
        architecture="graph",
        importer="graphdef_pb",
        sources=(
            Source(
                "animeganv3/AnimeGANv3_Shinkai_37.pb",
                "ecae7b7dc212e2dcb5f484ac50946740cd6b5e630233989799a35526f611a0a9",
                github_file(*TUANMJNH, "resources/AnimeGANv3_Shinkai_37.pb"),
            ),
        ),
        licence=V3_LICENCE,
        description="Bright skies and crisp light, Makoto Shinkai-like.",
    ),
    Style(
        id="v3-cute",
        label="Cute (AnimeGANv3 tiny)",
        architecture="graph",
        importer="onnx_graph",
        sources=(
            Source(
                "animeganv3/AnimeGANv3_tiny_Cute.onnx",
                "3ef02d6b2939a0e81621abc5beb0e741bb58654570033cd0e97f6b6ef37c1171",
                None,  # not found in the stored history of tuanmjnh/AnimeGANv3_Video: no origin to pin (mirror only)
            ),
        ),
        licence=V3_LICENCE,
        description="Soft and cute; the fastest style.",
    ),
    Style(
        id="v3-sketch",
        label="Portrait sketch (AnimeGANv3)",
        architecture="graph",
        importer="onnx_graph",
        sources=(
            Source(
                "animeganv3/AnimeGANv3_PortraitSketch_fp16.onnx",
                "b78d071098843614408f55760acfff670afb597d035d198a9a122e37f8b10b88",
                None,  # not found in the stored history of zeeblaze/meetig-AI-T: no origin to pin (mirror only)
            ),
        ),
        licence=V3_LICENCE,
        description="Bold black ink lines on white; whole photos and faces.",
    ),
    Style(
        id="v3-jp-face",
        label="JP face (AnimeGANv3, face crops)",
        architecture="graph",
        importer="onnx_graph",
        sources=(
            Source(
                "animeganv3/AnimeGANv3_JP_face_v1.0_fp16.onnx",
                "696daebf32d80d25b54072901fdfcf80775176c7e06fe678be1ea93ea6f97c18",
                github_file(*ZEEBLAZE, "models/quantized-models/AnimeGANv3_JP_face_v1.0_fp16.onnx"),
            ),
        ),
        licence=V3_LICENCE,
        description="Turns an aligned face crop into an anime face (big eyes, clean skin, drawn hair); "
        "on a whole photo it blanks the faces.",
        kind="face",
        paint_shape=(448, 384),
    ),
    Style(
        id="whitebox",
        label="White-box cartoon",
        architecture="graph",
        importer="tflite_whitebox",
        sources=(
            Source(
                "whitebox/whitebox_cartoon_gan_dr.tflite",
                "eea087546bfe1dd951c01713af5fbc527c5a351ccf2db3a166e202db5eb5c90b",
                github_file("margaretmz/Cartoonizer-with-TFLite", "8e275dd7fdc27164ef4fb515ffb0a5eb95b2a991",
                            "android/app/src/main/ml/whitebox_cartoon_gan_dr.tflite"),
            ),
        ),
        licence=WHITEBOX_LICENCE,
        description="Flat cartoon colours and clean edges (White-box Cartoonization with its guided filter).",
    ),
    _cartoongan("shinkai", "Shinkai (CartoonGAN light)",
                "Clean anime-film look (light ShuffleNet generator); the Apache-2.0 style.",
                ("91ee0cf957489e48506c40ef2aea41e0484a331ece6b5ca5aa12c15bf594e339",
                 "0b24e4ab0850e674078d7f856b7ae224bffd799d1501ff47c9f4792c99ebd859",
                 "60cdaacda3aa67e2761efeddb94555ef3968f4a6e424664aecfed161772dba0c",
                 "f2df6b1a2f6098ea770379ce218d25b686d25a16499ec962d1e11fe6b48df62f")),
    _cartoongan("paprika", "Paprika (CartoonGAN light)",
                "Sepia tones with visible checkerboard artefacts; Apache-2.0.",
                ("59bd0f6ae50c7c84b703b404a02c88eb57ba273e721a78a9860d2c3c4cac6b33",
                 "bacebca19583e8c068fbde83d0fa812587cb47162c799f7a93a8b8f5a5f3c03b",
                 "658059a798a9147bcc0615a1f41d376b23d4bb68d764cd2d8f4ca5305245927a",
                 "f2df6b1a2f6098ea770379ce218d25b686d25a16499ec962d1e11fe6b48df62f")),
    Style(
        id="v2-hayao",
        label="Hayao (AnimeGANv2)",
        architecture="animeganv2",
        importer="tflite_v2",
        sources=(
            Source(
                "animeganv2/animeganv2_hayao_256x256_integer_quant.tflite",
                "7d9157db18ad9238a7189c4f56786dbb865f980e219c167def0988fc67ffe5e0",
                github_file(*TERRYKY, "gl2animegan2/model/animeganv2_hayao_256x256_integer_quant.tflite"),
            ),
        ),
        licence=V2_LICENCE,
        description="The official AnimeGANv2 Hayao generator (int8 weights dequantized to float).",
    ),
    _v1("hayao", "Hayao (AnimeGAN v1)", V1_LICENCE, "The original AnimeGAN Hayao style."),
    _v1("shinkai", "Shinkai (AnimeGAN v1)", V1_LICENCE, "The original AnimeGAN Shinkai style."),
    _v1("paprika", "Paprika (AnimeGAN v1)", V1_LICENCE, "The original AnimeGAN Paprika style."),
    _v1("charge", "Charge (AnimeGAN-js)", V1_JS_LICENCE, "Trained by the AnimeGAN-js author."),
    _v1("iblard", "Iblard (AnimeGAN-js)", V1_JS_LICENCE, "Trained by the AnimeGAN-js author."),
    _v1("strange_daddy", "Strange Daddy (AnimeGAN-js)", V1_JS_LICENCE, "Trained by the AnimeGAN-js author."),
    _port("face_paint_512_v2", "Face Paint v2 (port)", "Face-specialised; from the PyTorch port."),
    _port("face_paint_512_v1", "Face Paint v1 (port)", "Face-specialised; from the PyTorch port."),
    _port("celeba_distill", "CelebA distill (port)", "Distilled face style from the PyTorch port."),
    _port("paprika", "Paprika (AnimeGANv2 port)", "Paprika style from the PyTorch port."),
)

# Not a style: the face detector (YuNet, OpenCV Zoo; Apache-2.0 / MIT), copied into the store by
# models/helpers.py.
# Its origin is libfacedetection.train's dynamic-size export; that file has three versions in the repository's
# history and the stored copy is binary, so that this commit holds exactly these bytes is not confirmed (the
# checksum decides after download). (OpenCV Zoo's fixed-size 640x640 file is confirmed by its Git LFS record,
# whose sha256 equals our face_detection_yunet_2023mar.onnx, but the detector needs the dynamic-size one.)
FACE_DETECTOR = Source(
    "face/face_detection_yunet_2023mar_dynamic.onnx",
    "daede24002cc8590f457998cc5e6c9e8b82f45f6bd969506a8913cd4ed10a2d3",
    github_file("ShiqiYu/libfacedetection.train", "02246e79b1e976c83d1e135a85e0628120c93769",
                "onnx/yunet_n_dynamic.onnx"),
)

# Not a style: MediaPipe selfie (person) segmentation, Apache-2.0, from the npm package
# @mediapipe/selfie_segmentation 0.1.1675465747; 256x256 RGB in [0, 1] -> person probability. Converted into a
# graph artefact by models/helpers.py (importer "tflite_graph"). Origin: the file inside that version's tarball on
# the npm registry (``#member``: see anipaint.models.downloads); `npm pack` of that version holds exactly these bytes.
SEGMENTER = Source(
    "segmentation/selfie_segmentation.tflite",
    "8d13b7fae74af625c641226813616a2117bd6bca19eb3b75574621fc08557f27",
    "https://registry.npmjs.org/@mediapipe/selfie_segmentation/-/selfie_segmentation-0.1.1675465747.tgz"
    "#package/selfie_segmentation.tflite",
)
SEGMENTER_IMPORTER = "tflite_graph"

# Files that are not styles, by the name `anipaint models fetch` reports them under.
EXTRA_SOURCES: dict[str, Source] = {"face-detector": FACE_DETECTOR, "segmenter": SEGMENTER}

# Short names, each meaning one style on every machine (never whichever happens to be present).
ALIASES: dict[str, str] = {
    "hayao": "v3-hayao",
    "shinkai": "v3-shinkai",
    "paprika": "v2-paprika",
    "cute": "v3-cute",
    "sketch": "v3-sketch",
    "cartoon": "whitebox",
    "charge": "v1-charge",
    "iblard": "v1-iblard",
    "strange-daddy": "v1-strange-daddy",
    "face-paint": "v2-face-paint-512-v2",
    "celeba": "v2-celeba-distill",
}

_BY_ID = {s.id: s for s in STYLES}


def all_styles() -> tuple[Style, ...]:
    return STYLES


def get_style(style_id: str) -> Style:
    """The row for an exact id (no alias resolution)."""
    try:
        return _BY_ID[style_id]
    except KeyError:
        raise UnknownStyleError(f"unknown style {style_id!r}; known: {', '.join(_BY_ID)}") from None


def aliases_of(style_id: str) -> tuple[str, ...]:
    """The short names that mean this style."""
    return tuple(alias for alias, target in ALIASES.items() if target == style_id)


def style_id(name: str) -> str:
    """The style id a user-given name means: an id (any case, ``_`` for ``-``) or an alias."""
    key = name.strip().lower().replace("_", "-")
    if key in _BY_ID:
        return key
    if key in ALIASES:
        return ALIASES[key]
    raise UnknownStyleError(
        f"unknown style {name!r}; known ids: {', '.join(_BY_ID)}; aliases: {', '.join(ALIASES)}"
    )
