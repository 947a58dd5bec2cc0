"""Where the tests find the repository, the original model files and the sample photos."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = Path(os.environ.get("ANIPAINT_SOURCES") or REPO.parent / "shared" / "models").resolve()
SAMPLES = SOURCES.parent / "samples"  # as Settings.samples_dir finds them beside the sources
GROUP_PHOTO = SAMPLES / "group_pakutaso.jpg"
