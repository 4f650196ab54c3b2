"""notewell: semantic search over your own notes, answered by a warm local daemon.

This module stays empty of imports on purpose: the per-keystroke client imports
``notewell.wire.paths`` and ``notewell.wire.protocol`` and must not pay for anything else.
"""

__version__ = "0.1.0"
