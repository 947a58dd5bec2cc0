"""``python -m anipaint.cli.bench [--quick] [--json PATH] [--only v2|styles|full]``, or ``child KIND ...``."""

import sys

from anipaint.cli.bench import main, parser

if len(sys.argv) > 2 and sys.argv[1] == "child" and sys.argv[2] == "stream":
    from anipaint.cli.bench.full_table import child_stream

    sys.exit(child_stream(sys.argv[3], int(sys.argv[4])))
if len(sys.argv) > 1 and sys.argv[1] == "child":
    from anipaint.cli.bench.v2_table import child

    sys.exit(child(sys.argv[2:]))
sys.exit(main(parser().parse_args()))
