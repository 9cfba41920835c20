import sys

from core.cli.commands import main

sys.exit(main())
