"""python3 -m inca_testbed: the same as scripts/testbed.py."""
import sys

from .cli import main

sys.exit(main())
