"""notewell: semantic search over your own notes, answered by a warm local daemon.

This module stays empty of imports on purpose: the per-keystroke client imports
``notewell.wire.paths`` and ``notewell.wire.protocol`` and must not pay for anything else.
"""

__version__ = "0.1.0"


def installed_version() -> str | None:
    """The version now on disk where this package was imported from. After an upgrade in
    place a running daemon still has the old ``__version__`` in memory; this reads the
    new file (no import: the client imports this module on every keystroke)."""
    try:
        with open(__file__, encoding="utf-8") as f:
            for line in f:
                if line.startswith("__version__ = "):
                    return line.split("=", 1)[1].strip().strip("\"'")
    except OSError:
        pass
    return None
