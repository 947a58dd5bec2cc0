"""What every converted file in the store is stamped with: the store's format version and the converter code's digest.

A folder's ``meta.json`` holds the stamp it was converted under; one whose stamp differs from this code's is stale
and converted again. The styles' artefacts (:mod:`anipaint.models.store`) and the helper models
(:mod:`anipaint.models.helpers`) both carry it, which is why it sits below both rather than in the store: the store
converts the helper models along with the styles, so they cannot ask the store for it.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

# Bump when the store's layout changes. Converter *code* changes are caught by converter_digest() below.
FORMAT_VERSION = 1
# The code an artefact's content depends on: an artefact converted by other code is stale and is rebuilt
# (an upgrade once left a v3 artefact that the new graph runner couldn't execute).
_CONVERTER_CODE = ("importers", "networks")


@functools.lru_cache(maxsize=1)
def converter_digest() -> str:
    """16 hex digits of the importer and network modules' source: part of every artefact's meta."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent.parent
    for folder in _CONVERTER_CODE:
        for path in sorted((package / folder).glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def read_meta(folder: Path) -> dict | None:
    """A store folder's ``meta.json``, or None when it is missing or unreadable."""
    try:
        return json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return None
