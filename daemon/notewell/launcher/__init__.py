"""Launcher integration: the Alfred workflow (its ``info.plist``, icons and the actions its
connections run). The Raycast extension lives in ``workflow/raycast/`` and talks to the
daemon's socket directly; the auto-start agent is ``notewell.agent``."""
