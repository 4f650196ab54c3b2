"""Related notes in Alfred: what the workflow's Universal Action and Hotkey run.

``notewell alfred related ARG`` (through the workflow's zsh client, ``--alfred-related``):
ARG is the selected text, or the path of the selected file (a Universal Action on a file,
the Hotkey in Finder). It asks the daemon's ``related`` op for Alfred's JSON (for a file,
the daemon reads its text itself: only .md, .txt and .pdf, size-capped) and prints it.
Whatever goes wrong prints one item that says what happened and what to do: an empty
selection, one that is not text, a file of another kind, a daemon that is down or warming
up; never a traceback. A selection over ``MAX_RELATED_CHARS`` is cut, and the answer says
so. Imports only ``wire`` (and ``os``, to tell a file from text).
"""

from __future__ import annotations

import os
import sys

from notewell import __version__
from notewell.wire import client, messages, protocol
from notewell.wire.requests import MAX_PATH_CHARS, MAX_RELATED_CHARS

TIMEOUT = 30.0  # a long text is embedded passage by passage: seconds, not milliseconds
SELECT_HINT = ("Select some text, or a Markdown, text or PDF file, then run the "
               "Universal Action “Related notes” or its Hotkey")


def selected_file(arg: str) -> str | None:
    """The file ``arg`` names when it is one absolute path (what Alfred passes for a
    selected file), else None: the argument is text."""
    line = arg.strip()
    if "\n" in line or not line.startswith(("/", "~/")) or len(line) > MAX_PATH_CHARS:
        return None
    path = os.path.expanduser(line)
    return path if os.path.isfile(path) else None


def related_request(arg: str) -> dict:
    path = selected_file(arg)
    if path is not None:
        return protocol.request("related", notewell=__version__, path=path,
                                format="alfred")
    # Bytes that are not UTF-8 (a binary selection) arrive as surrogates: sent as
    # replacement characters, which the daemon tells from text.
    text = arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return protocol.request("related", notewell=__version__, text=text[:MAX_RELATED_CHARS],
                            truncated=len(text) > MAX_RELATED_CHARS, format="alfred")


def alfred_output(arg: str) -> str:
    if not arg.strip():
        return messages.message_feedback("Nothing selected", SELECT_HINT)
    try:
        reply = client.ask(related_request(arg), timeout=TIMEOUT)
    except TimeoutError:
        return messages.message_feedback("notewell did not answer in time",
                                         "It may be busy indexing; try again, or select "
                                         "less text")
    except (OSError, protocol.ProtocolError) as e:
        return client._unreachable(e, "")
    return _render(reply)


def _render(reply: dict) -> str:
    result = reply.get("result") if reply.get("ok") else None
    if isinstance(result, dict) and isinstance(result.get("alfred"), str):
        return result["alfred"]
    error = reply.get("error") or {}
    code, message = str(error.get("code", "")), str(error.get("message", ""))
    if code == "warming_up":
        return messages.message_feedback("notewell is starting…",
                                         "Loading the model and index", rerun=0.5)
    if code == "bad_args" and message.startswith(("text:", "path:")):
        what = "this selection" if message.startswith("text:") else "this file"
        reason = message.split(":", 1)[1].strip()
        return messages.message_feedback(f"notewell cannot read {what}",
                                         reason[:1].upper() + reason[1:])
    if not reply.get("ok"):
        return client._render(reply, "")  # restarting, other installation, ...
    return messages.message_feedback("notewell sent an unexpected reply",
                                     "Restart the daemon: notewell agent restart")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        out = alfred_output(" ".join(args))
    except Exception as e:  # Alfred must always get valid JSON
        out = messages.message_feedback("notewell client error", f"{type(e).__name__}: {e}")
    sys.stdout.buffer.write(out.encode("utf-8"))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
