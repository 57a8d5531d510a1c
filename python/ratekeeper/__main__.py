"""``python -m ratekeeper COMMAND ...``: the command line (see ``ratekeeper.cli``)."""

import sys

from ratekeeper.cli import main

if __name__ == "__main__":
    sys.exit(main())
