"""notewell: semantic search over your own notes, answered by a warm local daemon.

This module stays empty of imports on purpose: the per-keystroke client imports
``notewell.paths`` and ``notewell.protocol`` and must not pay for anything else.
"""

__version__ = "0.1.0"
