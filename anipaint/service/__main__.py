"""``python -m anipaint.service``: serve on ANIPAINT_HOST / ANIPAINT_PORT."""

from anipaint.service.app import main

main()
