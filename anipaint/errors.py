"""Errors a user can act on. Each message is a plain sentence meant to be shown as is (CLI, HTTP JSON)."""

from __future__ import annotations


class AnipaintError(Exception):
    """Base class for every error anipaint reports to users."""


class ImageError(AnipaintError, ValueError):
    """The input is not an image we can read (corrupt, truncated, unsupported format)."""


class ImageTooLargeError(ImageError):
    """The image has more pixels or bytes than the configured limit."""


class SettingsError(AnipaintError, ValueError):
    """An ``ANIPAINT_*`` environment variable holds a value its setting can't take."""


class OptionError(AnipaintError, ValueError):
    """A painting option is out of its range (for example a style strength above 1)."""


class StyleError(AnipaintError, LookupError):
    """The style is unknown or not available on this machine."""


class UnknownStyleError(StyleError):
    """The name is neither a style id nor an alias."""


class LicenceError(StyleError):
    """The style's licence does not allow the use this installation is limited to (commercial-only mode)."""


class ModelStoreError(AnipaintError):
    """A model source is missing, fails its checksum, or cannot be converted."""


class ChecksumError(ModelStoreError):
    """A downloaded file is not the file the registry names."""


class DownloadError(ModelStoreError):
    """A model file could not be downloaded: the origin could not be reached, answered an error, or the transfer
    stalled. ``why`` is the cause as a short clause ("HTTP 503", "cannot reach github.com: …"); ``lasting`` says
    whether the origin answered that the file is not there, which waiting alone will not change; ``retry_at`` (a
    Unix time) is when the next try on first use is due, when one is scheduled."""

    def __init__(self, message: str, *, why: str | None = None, lasting: bool = False,
                 retry_at: float | None = None, style: str | None = None) -> None:
        super().__init__(message)
        self.why = why or message
        self.lasting = lasting
        self.retry_at = retry_at
        self.style = style  # the style whose files these are, when a paint asked for it


class ModelImportError(AnipaintError, ValueError):
    """An original model file can't be read or translated by its importer (damaged, or not the format it claims)."""


class ScratchSpaceError(AnipaintError, OSError):
    """Full-resolution painting cannot write its temporary layer files (missing folder, full disk)."""
