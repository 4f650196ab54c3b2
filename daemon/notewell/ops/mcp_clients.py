"""Adding ``notewell mcp`` to an agent's client, and telling whether it is there.

Claude Desktop and Cursor read a JSON file with an ``mcpServers`` map; the ``notewell``
entry is added or replaced with this installation's absolute command, every other key and
entry kept as it was, the file it replaces kept beside it as ``<file>.notewell-backup``,
and nothing written when the entry is already right (so a second run changes nothing).
A file that is not valid JSON is left alone, with an error that names it. Claude Code
keeps its servers itself: ``claude mcp add --scope user`` when the ``claude`` command
exists, else the command is printed for the user to run. ``doctor`` reads the same files
to say which clients have notewell and whether their entry runs this installation.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable

from notewell.ops.login_agent import program
from notewell.wire import paths

CLIENTS = ("claude-desktop", "claude-code", "cursor")
NAME = "notewell"
BACKUP_SUFFIX = ".notewell-backup"

Runner = Callable[..., subprocess.CompletedProcess]


class ClientConfigError(Exception):
    """A client's configuration cannot be read or changed; the message says which file."""


def server_entry() -> dict:
    """The ``mcpServers`` entry that runs this installation's ``notewell mcp``."""
    command = program()[:-1]  # the daemon's command line without "serve"
    entry: dict = {"command": command[0], "args": [*command[1:], "mcp"]}
    home = os.environ.get("NOTEWELL_HOME")
    if home:
        entry["env"] = {"NOTEWELL_HOME": os.path.abspath(os.path.expanduser(home))}
    return entry


def config_path(client: str, platform: str | None = None) -> str:
    """Where ``client`` keeps its MCP servers (for Claude Code, the file ``claude mcp add
    --scope user`` writes)."""
    platform = platform or sys.platform
    home = os.path.expanduser("~")
    if client == "claude-desktop":
        if platform == "darwin":
            return os.path.join(home, "Library", "Application Support", "Claude",
                                "claude_desktop_config.json")
        base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        return os.path.join(base, "Claude", "claude_desktop_config.json")
    if client == "cursor":
        return os.path.join(home, ".cursor", "mcp.json")
    if client == "claude-code":
        return os.path.join(home, ".claude.json")
    raise ClientConfigError(f"unknown client {client!r}; choose from {', '.join(CLIENTS)}")


def _read(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise ClientConfigError(f"cannot read {path}: {e.strerror}") from None
    try:
        doc = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as e:
        raise ClientConfigError(f"{path} is not valid JSON (line {e.lineno}: {e.msg}); "
                                "fix it by hand, then run this again") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("mcpServers", {}), dict):
        raise ClientConfigError(f"{path} does not hold a JSON object with an 'mcpServers' "
                                "object; fix it by hand, then run this again")
    return doc


def install(client: str, dry_run: bool = False, platform: str | None = None,
            run: Runner = subprocess.run, which: Callable[[str], str | None] = shutil.which
            ) -> str:
    """Add or update the notewell entry in ``client``'s configuration; what was done (or,
    with ``dry_run``, what would be)."""
    if client == "claude-code":
        return _install_claude_code(dry_run, run, which)
    path = config_path(client, platform)
    doc = _read(path)
    servers = dict(doc.get("mcpServers") or {})
    entry = server_entry()
    if servers.get(NAME) == entry:
        return f"{path}: the notewell entry is already up to date; nothing changed"
    servers[NAME] = entry
    new = {**doc, "mcpServers": servers}
    old_text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n" if doc else ""
    new_text = json.dumps(new, indent=2, ensure_ascii=False) + "\n"
    if dry_run:
        diff = difflib.unified_diff(old_text.splitlines(True), new_text.splitlines(True),
                                    path, path + " (after)")
        return f"would change {path}:\n" + "".join(diff).rstrip("\n")
    backup = ""
    if os.path.exists(path):
        shutil.copy2(path, path + BACKUP_SUFFIX)
        backup = f" (the previous file is {path + BACKUP_SUFFIX})"
        mode = os.stat(path).st_mode & 0o777
    else:
        mode = 0o600
    paths.write_atomic(path, new_text.encode("utf-8"))
    os.chmod(path, mode)
    what = "updated" if "mcpServers" in doc and NAME in doc["mcpServers"] else "added"
    return (f"{what} the notewell entry in {path}{backup}; restart "
            f"{'Claude Desktop' if client == 'claude-desktop' else 'Cursor'} to use it")


def _claude_command() -> list[str]:
    """``claude mcp add``: options before the name, ``--env`` (which takes several values)
    ended by ``--scope``, the server's command after ``--``."""
    entry = server_entry()
    env = [a for k, v in entry.get("env", {}).items() for a in ("--env", f"{k}={v}")]
    return ["claude", "mcp", "add", *env, "--scope", "user", NAME, "--", entry["command"],
            *entry["args"]]


def _install_claude_code(dry_run: bool, run: Runner, which: Callable[[str], str | None]
                         ) -> str:
    add = _claude_command()
    shown = shlex.join(add)
    if which("claude") is None:
        return ("the `claude` command is not on PATH; to add notewell to Claude Code, run:\n"
                f"  claude mcp remove --scope user {NAME}   # only if it is there already\n"
                f"  {shown}")
    if dry_run:
        return f"would run:\n  claude mcp remove --scope user {NAME}\n  {shown}"
    # `add` refuses a name that exists: remove first, so a second run updates the entry.
    run(["claude", "mcp", "remove", "--scope", "user", NAME], capture_output=True,
        text=True, check=False)
    result = run(add, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout or "").strip().splitlines()
        raise ClientConfigError(f"`{shown}` failed: {detail[-1] if detail else result.returncode}")
    return f"added notewell to Claude Code (user scope): {shown}"


def configured(platform: str | None = None) -> list[tuple[str, str | None, bool]]:
    """For each client: (client, the command its notewell entry runs or None when it has
    none, whether that entry is this installation's)."""
    mine = server_entry()
    found = []
    for client in CLIENTS:
        try:
            doc = _read(config_path(client, platform))
        except ClientConfigError:
            doc = {}
        entry = (doc.get("mcpServers") or {}).get(NAME)
        if not isinstance(entry, dict):
            found.append((client, None, False))
            continue
        command = " ".join([str(entry.get("command", "")), *map(str, entry.get("args", []))])
        same = (entry.get("command") == mine["command"] and entry.get("args") == mine["args"]
                and (entry.get("env") or {}).get("NOTEWELL_HOME")
                == mine.get("env", {}).get("NOTEWELL_HOME"))
        found.append((client, command, same))
    return found
