"""``python -m vocalis``: the ``vocalis`` command line."""

import sys

from vocalis.cli import main

if __name__ == "__main__":
    sys.exit(main())
