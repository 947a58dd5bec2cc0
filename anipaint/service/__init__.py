"""The web service: the page, the HTTP API and the job queue (``anipaint serve``)."""
