#!/usr/bin/python3
"""The multi-host testbed's command line (python/inca_testbed/cli.py; run with
--help for its commands). This file only finds the package in the checkout."""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "python"))
from inca_testbed.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
