"""The web service: the page, the HTTP API and the job queue (``anipaint serve``)."""

from anipaint.service.app import create_app, serve

__all__ = ["create_app", "serve"]
