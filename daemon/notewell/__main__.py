"""``python -m notewell`` is the ``notewell`` command."""

import sys

from .cli import main

sys.exit(main())
