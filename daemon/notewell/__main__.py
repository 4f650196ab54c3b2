"""``python -m notewell`` is the ``notewell`` command."""

import sys

from notewell.cli import main

sys.exit(main())
