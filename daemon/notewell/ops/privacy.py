"""Which files this process may not read, and which program needs the grant.

macOS privacy controls (Full Disk Access; Files and Folders for ~/Documents, ~/Desktop,
~/Downloads and iCloud Drive; other apps' containers such as Bear's) refuse a process
with "Operation not permitted" (EPERM), or SQLite's "unable to open database file" over
it; plain permissions answer EACCES. ``doctor`` tells these from a path that is not there
(ENOENT) by the errno of the call that failed (``sources.base.access_problem``), never by
the words of a message.

The grant is per program, and the program is the interpreter: launchd starts the agent's
``notewell serve`` without Terminal, so Terminal's grant does not count. A framework
build of Python (Homebrew's, python.org's) runs ``Python.app`` inside the framework, and
that is what macOS lists and asks about, not ``bin/python3``; any other Python (pyenv,
uv's) is its executable, symlinks resolved. Homebrew's Python.app moves with every
``brew upgrade python``, and the grant does not follow it.
"""

from __future__ import annotations

import os
import sys

from notewell.sources.base import SourceDenied, access_problem, is_denied

SETTINGS = "System Settings > Privacy & Security > Full Disk Access"


def grant_target(base_prefix: str | None = None, executable: str | None = None) -> str:
    """The program macOS asks about for this Python: the framework's ``Python.app`` when
    ``base_prefix`` is inside a ``Python.framework``, else the executable, resolved."""
    real = os.path.realpath(base_prefix or sys.base_prefix)
    if "/Python.framework/Versions/" in real + "/":
        app = os.path.join(real, "Resources", "Python.app")
        if os.path.isdir(app):
            return app
    return os.path.realpath(executable or sys.executable)


def is_homebrew(target: str) -> bool:
    return "/Cellar/" in target or target.startswith(("/opt/homebrew/", "/usr/local/opt/"))


TERMINALS = {"Apple_Terminal": "Terminal", "iTerm.app": "iTerm", "vscode": "Visual Studio Code",
             "WarpTerminal": "Warp", "ghostty": "Ghostty"}  # $TERM_PROGRAM -> app


def terminal_app(environ: dict[str, str] | None = None) -> str:
    """The app a command run by hand is attributed to (macOS asks about it, not Python)."""
    program = (environ if environ is not None else os.environ).get("TERM_PROGRAM", "")
    return TERMINALS.get(program, program or "the app you run notewell from")


def grant_hint(platform: str, path: str = "", *, daemon_only: bool = False,
               base_prefix: str | None = None, executable: str | None = None,
               environ: dict[str, str] | None = None) -> str:
    """What to do about a refused ``path``: on macOS, the programs to allow and where.
    ``daemon_only``: the refusal was the daemon's, so the terminal's grant is irrelevant."""
    if platform != "darwin":
        where = f" (`ls -ld {path}`)" if path else ""
        return f"make it readable by your user: check its permissions{where}"
    target = grant_target(base_prefix, executable)
    who = f"{target} (the agent's daemon runs it)"
    if not daemon_only:  # this command was refused: its terminal lacks the grant too
        who += f" and {terminal_app(environ)} (this command runs in it)"
    hint = (f"allow {who} in {SETTINGS} (its + button, then Cmd-Shift-G to type a path), "
            "then `notewell agent restart`")
    if is_homebrew(target):
        hint += ("; Homebrew's Python moves with each `brew upgrade python`: allow the "
                 "new Python.app again after an upgrade")
    return hint


def diagnose(path: str) -> tuple[str, OSError] | None:
    """("not allowed" | "not there" | "cannot be read", the error) for a path this
    process cannot open, None when it can."""
    problem = access_problem(path)
    if problem is None:
        return None
    if is_denied(problem):
        return "not allowed", problem
    if isinstance(problem, (FileNotFoundError, NotADirectoryError)):
        return "not there", problem
    return "cannot be read", problem


def denied_path(error: BaseException) -> str | None:
    """The path a source was refused, when ``error`` is such a refusal."""
    if isinstance(error, SourceDenied):
        return error.path
    if isinstance(error, PermissionError):
        return error.filename or ""
    return None
