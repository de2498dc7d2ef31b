"""`python -m swbuild ...`: the same as the `swbuild` command."""
import sys

from .cli import main

sys.exit(main())
