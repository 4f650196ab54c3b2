"""Launcher integration: what Alfred shows and does, and the workflow that holds it.

Owns ``alfred`` (hits and messages as Alfred's Script Filter JSON, written once),
``alfred_workflow`` (the workflow bundle: ``info.plist``, icons, scripts),
``alfred_actions`` (what a chosen item's modifiers run), ``quicklook`` (Quick Look pages of
passages with the query's words marked, in the daemon's cache folder) and ``icons``
(drawn in code).
The Raycast extension lives in ``workflow/raycast/`` and talks to the daemon's socket
directly; the auto-start agent is ``notewell.ops.login_agent``. May import ``notes`` and
``wire``; ``alfred`` must stay import-free for the keystroke client.
"""
