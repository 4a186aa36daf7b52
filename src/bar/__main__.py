"""``python -m bar``: the ``bar`` command."""

import sys

from bar.cli.entry import main

raise SystemExit(main(sys.argv[1:]))
