"""Alfred messages the keystroke client renders by itself: daemon down, warming up, errors.

One item as Alfred's Script Filter JSON, written by ``alfred_json`` (the one writer, which
imports nothing: ``json`` alone costs the client more than its whole interpreter start).
Result lists are rendered in the daemon (``launcher.alfred``, with the same writer); this
is the client's only Alfred output. Imports only ``alfred_json``.
"""

from notewell.wire.alfred_json import feedback, message_item


def message_feedback(title: str, subtitle: str = "", *, arg: str | None = None,
                     action: str | None = None, rerun: float | None = None,
                     query: str | None = None) -> str:
    """One message item as Alfred JSON (the client's error paths). ``query`` rides along
    in the item's variables for its action (the "start the daemon" item shows Alfred
    again on it)."""
    return feedback([message_item(title, subtitle, arg=arg, action=action, query=query)],
                    rerun=rerun)


# What notewell-run.zsh prints when the installation the home records does not run: a
# literal there (Python is what is missing), pinned to ``message_feedback`` of these by
# tests/test_client_zsh.py.
INSTALLATION_MISSING = (
    "notewell: the installation this workflow runs is missing",
    "Run `notewell agent install` in a terminal (reinstall notewell first if its Python "
    "was removed)")
# ... and when it runs but fails (a broken install, a crash): doctor says which.
INSTALLATION_FAILED = (
    "notewell: the installation this workflow runs failed",
    "Run `notewell doctor` in a terminal: it says what is wrong and what to do")
