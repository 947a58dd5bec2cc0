"""``python -m anipaint.service``: serve on ANIPAINT_HOST / ANIPAINT_PORT."""

from anipaint.service.server import main

main()
