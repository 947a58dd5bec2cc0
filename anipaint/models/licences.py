"""The licence table: the terms each style's weights come with, as data.

A style row (:mod:`anipaint.models.registry`) points at one of these; a licence's ``id`` decides whether a
commercial-only installation offers the style.
"""

from __future__ import annotations

from dataclasses import dataclass

# Licence id → whether it allows commercial use.
LICENCE_IDS: dict[str, bool] = {"Apache-2.0": True, "CC-BY-NC-SA-4.0": False, "non-commercial": False}


@dataclass(frozen=True)
class Licence:
    """The terms a style's weights come with. ``id`` is one of :data:`LICENCE_IDS`."""

    id: str
    text: str  # the terms, as a user should read them
    source: str  # where the weights and their terms come from
    note: str = ""  # what else a user should know before relying on it (training data, provenance)

    def __post_init__(self) -> None:
        if self.id not in LICENCE_IDS:
            raise ValueError(f"unknown licence id {self.id!r}; known: {', '.join(LICENCE_IDS)}")

    @property
    def commercial(self) -> bool:
        """Whether the weights' own licence allows commercial use."""
        return LICENCE_IDS[self.id]


V1_LICENCE = Licence(
    "non-commercial",
    "AnimeGAN weights: free for non-commercial use only (research, teaching, personal use); commercial use needs "
    "the author's (TachibanaYoshino) permission.",
    "https://github.com/TachibanaYoshino/AnimeGAN, via https://github.com/coolseaweed/AnimeGAN-js",
)
V1_JS_LICENCE = Licence(
    "non-commercial",
    V1_LICENCE.text,
    "https://github.com/coolseaweed/AnimeGAN-js (under TachibanaYoshino/AnimeGAN's licence)",
    "Trained by the AnimeGAN-js author with the AnimeGAN network; provenance otherwise unknown.",
)
V2_LICENCE = Licence(
    "non-commercial",
    "AnimeGANv2 weights: free for non-commercial use (research, teaching, personal use); commercial use needs "
    "the author's (TachibanaYoshino) permission.",
    "https://github.com/TachibanaYoshino/AnimeGANv2",
)
V3_LICENCE = Licence(
    "non-commercial",
    "AnimeGANv3 weights: non-commercial use only; commercial use needs the author's (TachibanaYoshino) permission.",
    "https://github.com/TachibanaYoshino/AnimeGANv3",
)
PORT_LICENCE = Licence(
    "non-commercial",
    "Weights trained with AnimeGANv2, published in an MIT repository; AnimeGANv2's non-commercial terms apply "
    "to the style.",
    "https://github.com/bryandlee/animegan2-pytorch",
)
WHITEBOX_LICENCE = Licence(
    "CC-BY-NC-SA-4.0",
    "White-box Cartoonization weights: Creative Commons BY-NC-SA 4.0 — credit the authors, non-commercial use "
    "only, share adaptations alike.",
    "https://github.com/SystemErrorWang/White-box-Cartoonization, TFLite copy from "
    "https://github.com/margaretmz/Cartoonizer-with-TFLite (Apache-2.0 repository)",
)
CARTOONGAN_LICENCE = Licence(
    "Apache-2.0",
    "CartoonGAN light weights: Apache License 2.0 — commercial use allowed; keep the licence and notices.",
    "https://github.com/mnicnc404/CartoonGan-tensorflow (exported_models/, commit 2f26a52)",
    "Trained on frames of anime films: the licence covers the weights, not the rights in the films they learned "
    "from.",
)
LICENCES: tuple[Licence, ...] = (
    V1_LICENCE, V1_JS_LICENCE, V2_LICENCE, V3_LICENCE, PORT_LICENCE, WHITEBOX_LICENCE, CARTOONGAN_LICENCE
)
