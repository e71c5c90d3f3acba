"""`python -m super_serial`: the same command line as `super-serial`."""

import sys

from super_serial.cli import main

if __name__ == "__main__":
    sys.exit(main())
