"""``python -m anipaint.bench [--quick] [--json PATH] [--only v2|styles]``, or ``child naive|large ...``."""

import sys

from anipaint.bench import main, parser
from anipaint.bench.v2_table import child

if len(sys.argv) > 1 and sys.argv[1] == "child":
    sys.exit(child(sys.argv[2:]))
sys.exit(main(parser().parse_args()))
