"""What a paint can be asked for, defined once.

:class:`PaintOptions` holds every option of a paint with its default, its description and its checks. The library
takes it (``Painter.paint_result``, ``video.paint_video``); the CLI's flags, the API's form fields and their
OpenAPI descriptions, and the stored job are generated from its fields, so a new option is one field here plus its
use in the pipeline.

Each field's ``kind`` tells the interfaces how to present it: ``style`` (a style id or alias), ``side`` (a long-side
cap in pixels or full resolution), ``switch`` (on/off), ``fraction`` (0 to 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from anipaint.errors import OptionError
from anipaint.settings import Settings

# The long-side cap a caller may ask for; 0 / "original" means full resolution.
MAX_SIDE_RANGE = (32, 16384)
FULL_RESOLUTION = ("0", "none", "original", "full")
OptionKind = Literal["style", "side", "switch", "fraction"]


class _Default:
    def __repr__(self) -> str:
        return "<settings default>"


DEFAULT: Any = _Default()  # "use the value from settings"


def _option(default: Any, kind: OptionKind, help: str, *, flag: str | None = None, short: str | None = None) -> Any:
    return field(default=default, metadata={"kind": kind, "help": help, "flag": flag, "short": short})


@dataclass(frozen=True)
class Option:
    """One field of :class:`PaintOptions` as an interface presents it."""

    name: str
    kind: OptionKind
    help: str
    default: Any
    flag: str  # the CLI flag, e.g. --max-side
    short: str | None = None  # a one-letter CLI alias, e.g. -s


@dataclass(frozen=True)
class PaintOptions:
    """A paint's options, checked when made (:class:`OptionError` with a sentence for the user).

    >>> from anipaint import PaintOptions
    >>> PaintOptions(style="hayao", max_side=1024, strength=0.7).strength
    0.7
    """

    style: str | None = _option(
        None, "style", "Style id or alias; default: the configured default style.", short="-s"
    )
    max_side: int | None = _option(
        DEFAULT, "side", "Long-side cap in pixels; 0 or 'original' = full resolution; default: the configured cap."
    )
    faces: bool | None = _option(
        None, "switch", "Restyle faces at their own resolution; default: the configured choice (on)."
    )
    face_style: str | None = _option(None, "style", "Style id or alias for the faces; default: the chosen style.")
    strength: float = _option(1.0, "fraction", "How much of the style: 0 = the photo, 1 = the full style.")
    portrait: bool = _option(
        False, "switch", "Turn each face into an anime face with the face model (AnimeGANv3 JP face)."
    )
    background: str | None = _option(
        None, "style", "Style id or alias for everything but the people; default: the chosen style. Not a face style.",
        flag="--background-style",
    )
    temporal: bool | None = _option(
        None, "switch", "Videos and animated pictures: keep each frame steady with the last one along the motion "
        "(off: every frame painted on its own); default: on. Pictures ignore it.",
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            object.__setattr__(self, f.name, _CHECKS[f.metadata["kind"]](f.name, value, f.default))

    def settled(self, settings: Settings) -> PaintOptions:
        """The options with the settings' defaults filled in (the style stays as asked: the store resolves it)."""
        return replace(
            self,
            max_side=(settings.max_side or None) if self.max_side is DEFAULT else self.max_side,
            faces=settings.faces if self.faces is None else self.faces,
        )

    def to_json(self) -> dict:
        """JSON-safe values; a settings default is left out (it is filled in again when read back)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not DEFAULT}

    @classmethod
    def from_json(cls, raw: dict) -> PaintOptions:
        """Options from :meth:`to_json` (keys it does not know are ignored)."""
        return cls(**{o.name: raw[o.name] for o in options() if o.name in raw})


def options() -> list[Option]:
    """Every paint option, in the order the interfaces list them."""
    return [
        Option(f.name, f.metadata["kind"], f.metadata["help"], f.default,
               f.metadata["flag"] or "--" + f.name.replace("_", "-"), f.metadata["short"])
        for f in fields(PaintOptions)
    ]


def parse_max_side(value: str | int | None, default: int | None = None) -> int | None:
    """A long-side cap from text (CLI flag, form field): pixels within MAX_SIDE_RANGE, or None for full resolution
    ("0", "original", "full", "none"). Empty text gives ``default`` (0 there also means full resolution).
    Raises OptionError with a sentence for the user."""
    text = "" if value is None else str(value).strip().lower()
    if text == "":
        return default or None
    if text in FULL_RESOLUTION:
        return None
    try:
        number = int(text)
    except ValueError:
        raise OptionError(f"max side must be a number of pixels or 'original', not {value!r}") from None
    low, high = MAX_SIDE_RANGE
    if not low <= number <= high:
        raise OptionError(f"max side must be between {low} and {high} pixels (or 0 for the original size), "
                          f"not {number}")
    return number


def check_strength(strength: Any) -> float:
    """The strength as a float in [0, 1], or a clear error."""
    try:
        value = float(strength)
    except (TypeError, ValueError):
        raise OptionError(f"strength must be a number from 0 to 1, not {strength!r}") from None
    if not 0.0 <= value <= 1.0:  # also refuses NaN
        raise OptionError(f"strength must be from 0 (the photo) to 1 (the full style), not {strength!r}")
    return value


def _style(name: str, value: Any, default: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise OptionError(f"{name} must be a style id or alias, not {value!r}")
    return value.strip() or None


def _side(name: str, value: Any, default: Any) -> int | None:
    if value is DEFAULT or value is None:
        return value
    if isinstance(value, bool):
        raise OptionError(f"max side must be a number of pixels or 'original', not {value!r}")
    return parse_max_side(value)


def _switch(name: str, value: Any, default: Any) -> bool | None:
    if value is None and default is None:  # None: the settings decide
        return None
    if not isinstance(value, bool):
        raise OptionError(f"{name} must be true or false, not {value!r}")
    return value


def _fraction(name: str, value: Any, default: Any) -> float:
    return check_strength(value)


_CHECKS = {"style": _style, "side": _side, "switch": _switch, "fraction": _fraction}
