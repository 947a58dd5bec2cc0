"""The optional parts of the install (pip extras), and the one line that names the one a command lacks."""

from __future__ import annotations

import importlib.util

from anipaint.errors import AnipaintError

# What each extra brings, by the modules its commands import.
EXTRAS = {
    "serve": ("fastapi", "uvicorn", "multipart", "prometheus_client", "fastapi_offline"),
    "scale": ("celery", "redis", "boto3"),
    "watch": ("watchdog",),
}


def needs_extra(extra: str, what: str) -> None:
    """Refuse, in one line that says what to install, a command whose extra is not installed."""
    missing = [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]
    if missing:
        raise AnipaintError(f"{what} needs anipaint's {extra} extra ({', '.join(missing)} not installed): "
                            f"pip install 'anipaint[{extra}]'")
