import sys

from npoptim.cli import main

sys.exit(main())
