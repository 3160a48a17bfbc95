import sys

from npoptim.bench import main

sys.exit(main())
