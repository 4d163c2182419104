"""`python -m hpcprobe` runs the CLI."""

import sys

from hpcprobe.cli import main

sys.exit(main())
