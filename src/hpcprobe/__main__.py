"""`python -m hpcprobe` runs the CLI."""

import sys

from hpcprobe.console import main

sys.exit(main())
