"""What the Alfred workflow does when an item is actioned, and the stale-Enter guard.

Alfred runs ``notewell alfred action ACTION ARG`` (the workflow's zsh client runs the
installation its home records) with the item's variables in the environment: ``action``
(which overrides the connection's ACTION: a Bear note's ⌘ opens instead of revealing),
``note_id`` and ``query``, the query the item was rendered for.

The stale-Enter race: Alfred keeps showing the previous results while the client for the
newest keystroke runs, so a quick Enter can land on an item from an older query. The daemon
remembers the newest query an Alfred client asked for (op ``latest_query``), so here the
item's query is compared with it. When they differ the action asks the daemon whether the
item's note is also the top result of the newest query; if it is, Enter means the same
thing and goes ahead; if not (or the daemon cannot say), nothing is opened: Alfred is
shown again on the newest query, whose results are ready by then, and the user chooses
again. A result from an older query is never acted on silently.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence

from notewell.wire import paths

ALFRED_APP = "com.runningwithcrayons.Alfred"
BUNDLE_ID = "com.notewell.alfred"
SEARCH_TRIGGER = "search"
# Actions the stale-Enter guard checks first. "create" (a new note from the query) has no
# note: when its query is not the newest one, Alfred is shown again rather than creating
# a note named after an older query.
FILE_ACTIONS = ("open", "reveal", "copy", "quicklook", "preview", "create")

Runner = Callable[..., object]


def latest_query() -> str | None:
    """The newest query typed, as the daemon saw it (None if it cannot say)."""
    from notewell.wire import client, protocol

    try:
        reply = client.ask(protocol.request("latest_query"), timeout=2.0)
    except (OSError, protocol.ProtocolError):
        return None
    query = (reply.get("result") or {}).get("query") if reply.get("ok") else None
    return query if isinstance(query, str) else None


def is_stale(item_query: str | None, newest: str | None) -> bool:
    """An item is stale when a newer keystroke asked for a different query."""
    return item_query is not None and newest is not None and item_query != newest


def still_top_result(note_id: str, query: str) -> bool:
    """Whether ``note_id`` is the best hit for ``query`` now (False if nobody can say)."""
    from notewell.wire import client, protocol

    try:
        reply = client.ask(protocol.request("search", query=query, limit=1), timeout=2.0)
    except (OSError, protocol.ProtocolError):
        return False
    if not reply.get("ok"):
        return False
    hits = (reply.get("result") or {}).get("hits") or []
    return bool(hits) and hits[0].get("note_id") == note_id


def show_alfred(query: str, env: Mapping[str, str], run: Runner) -> None:
    """Show the Script Filter again on ``query`` through the workflow's External Trigger.
    The query travels as an argv item, never inside the AppleScript text."""
    bundle = env.get("alfred_workflow_bundleid") or BUNDLE_ID
    tell = (f'tell application id "{ALFRED_APP}" to run trigger "{SEARCH_TRIGGER}" in workflow '
            "(item 1 of argv) with argument (item 2 of argv)")
    run(["osascript", "-e", "on run argv", "-e", tell, "-e", "end run", bundle, query],
        check=False)


def perform(action: str, arg: str, env: Mapping[str, str], run: Runner,
            spawn: Runner) -> str:
    """Do ``action`` on ``arg``; returns a short line for Alfred's debugger."""
    utf8 = dict(os.environ, LANG=env.get("LANG") or "en_US.UTF-8")
    if action in ("open", "create"):
        # For create, the app's own URL scheme creates the note (Bear's create, Obsidian's
        # new, the editor's template): notewell never writes one.
        run(["open", arg], check=False)
        return f"opened {arg}" if action == "open" else f"asked the app to create {arg}"
    if action == "search":
        # A tag chosen from the list while typing "#wor": Alfred again, on "#work ".
        show_alfred(arg, env, run)
        return f"searching {arg!r}"
    if action == "reveal":
        run(["open", "-R", arg], check=False)
        return f"revealed {arg}"
    if action == "copy":
        # pbcopy decodes its input by the locale: give it UTF-8 explicitly.
        run(["pbcopy"], input=arg.encode("utf-8"), env=utf8, check=False)
        return f"copied {len(arg)} characters"
    if action in ("quicklook", "preview"):
        path = arg if action == "quicklook" else _preview_file(arg, env.get("note_id", ""))
        # qlmanage stays until the panel closes; Alfred must not wait for it.
        spawn(["qlmanage", "-p", path], stdout=subprocess.DEVNULL,
              stderr=subprocess.DEVNULL, start_new_session=True)
        return f"quick look {path}"
    if action in ("start", "restart"):
        if action == "restart":
            # The running daemon is another version: stop it cleanly (a clean exit, so
            # launchd leaves it down) and start this one, by the agent or by hand.
            stop_daemon()
        python = env.get("NOTEWELL_PYTHON") or sys.executable
        child = dict(os.environ)
        if env.get("NOTEWELL_PYTHONPATH"):
            child["PYTHONPATH"] = env["NOTEWELL_PYTHONPATH"]
        run([python, "-m", "notewell", "agent", "start"], env=child, check=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Back to Alfred on the same query: it says "starting…" and re-runs until ready.
        show_alfred(env.get("query") or "", env, run)
        return f"{action}ed the daemon"
    return f"nothing to do for action {action!r}"


def stop_daemon(wait: float = 5.0) -> None:
    """Ask the daemon to stop and wait until its socket is gone (or ``wait`` passes)."""
    import time

    from notewell.wire import client, protocol

    try:
        client.ask(protocol.request("stop"), timeout=2.0)
    except (OSError, protocol.ProtocolError):
        return
    deadline = time.monotonic() + wait
    while os.path.exists(paths.socket_path()) and time.monotonic() < deadline:
        time.sleep(0.05)


def _preview_file(passage: str, note_id: str) -> str:
    """A Bear note has no file to Quick Look: write the passage to a private temp file."""
    import tempfile

    directory = os.path.join(tempfile.gettempdir(), f"notewell-preview-{os.getuid()}")
    paths.ensure_private_dir(directory)
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in note_id)[:80] or "passage"
    path = os.path.join(directory, name + ".md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(passage)
    return path


def handle(argv: Sequence[str], env: Mapping[str, str], run: Runner = subprocess.run,
           spawn: Runner = subprocess.Popen,
           top_result: Callable[[str, str], bool] = still_top_result,
           newest: Callable[[], str | None] = latest_query) -> str:
    default = argv[0] if argv else "open"
    arg = argv[1] if len(argv) > 1 else ""
    action = env.get("action") or default
    if action in FILE_ACTIONS:
        latest = newest()
        if is_stale(env.get("query"), latest):
            assert latest is not None
            note_id = env.get("note_id", "")
            if not (note_id and top_result(note_id, latest)):
                show_alfred(latest, env, run)
                return (f"stale: item from {env.get('query')!r}, newest query {latest!r}; "
                        "showed Alfred again instead of acting")
    return perform(action, arg, env, run, spawn)


def main(argv: list[str] | None = None) -> int:
    message = handle(sys.argv[1:] if argv is None else argv, os.environ)
    print(f"notewell: {message}", file=sys.stderr)  # shown in Alfred's workflow debugger
    return 0


if __name__ == "__main__":
    sys.exit(main())
