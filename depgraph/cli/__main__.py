"""``python -m depgraph.cli``: the ``depgraph`` command."""

import sys

from . import main

if __name__ == "__main__":  # imported (not run), it does nothing
    sys.exit(main())
