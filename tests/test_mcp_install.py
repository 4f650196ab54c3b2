"""``notewell mcp install``: the notewell entry added to an agent client's configuration
with this installation's absolute command, everything else kept, a backup, safe to run
twice; and ``doctor`` saying which clients have it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import subprocess_env
from notewell.ops import doctor, mcp_clients

OTHER = {"theme": "dark", "mcpServers": {"github": {"command": "/usr/bin/gh-mcp",
                                                    "args": ["--x"], "env": {"T": "1"}}}}


def cursor_file(user_home: Path) -> Path:
    return user_home / ".cursor" / "mcp.json"


def test_the_entry_runs_this_installation_with_absolute_paths(home):
    entry = mcp_clients.server_entry()
    assert os.path.isabs(entry["command"]) and os.access(entry["command"], os.X_OK)
    assert entry["args"][-1] == "mcp"
    assert entry["env"] == {"NOTEWELL_HOME": str(home)}


def test_config_paths_per_client_and_platform(user_home):
    assert mcp_clients.config_path("claude-desktop", "darwin") == str(
        user_home / "Library/Application Support/Claude/claude_desktop_config.json")
    assert mcp_clients.config_path("claude-desktop", "linux") == str(
        user_home / ".config/Claude/claude_desktop_config.json")
    assert mcp_clients.config_path("cursor") == str(cursor_file(user_home))
    with pytest.raises(mcp_clients.ClientConfigError, match="choose from"):
        mcp_clients.config_path("vim")


def test_install_keeps_every_other_entry_backs_up_and_is_safe_twice(home, user_home):
    path = cursor_file(user_home)
    path.parent.mkdir()
    original = json.dumps(OTHER)
    path.write_text(original)
    path.chmod(0o640)
    message = mcp_clients.install("cursor")
    assert message.startswith(f"added the notewell entry in {path}") and "Cursor" in message
    doc = json.loads(path.read_text())
    assert doc["theme"] == "dark" and doc["mcpServers"]["github"] == OTHER["mcpServers"][
        "github"]
    assert doc["mcpServers"]["notewell"] == mcp_clients.server_entry()
    assert Path(str(path) + ".notewell-backup").read_text() == original
    assert path.stat().st_mode & 0o777 == 0o640
    before = path.read_bytes(), path.stat().st_mtime_ns
    assert "already up to date" in mcp_clients.install("cursor")
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    # An entry pointing elsewhere is updated in place.
    doc["mcpServers"]["notewell"] = {"command": "/old/notewell", "args": ["mcp"]}
    path.write_text(json.dumps(doc))
    assert mcp_clients.install("cursor").startswith("updated the notewell entry")
    assert json.loads(path.read_text())["mcpServers"]["notewell"] == \
        mcp_clients.server_entry()


def test_a_missing_file_is_created_private(home, user_home):
    mcp_clients.install("claude-desktop", platform="darwin")
    path = Path(mcp_clients.config_path("claude-desktop", "darwin"))
    assert json.loads(path.read_text()) == {"mcpServers": {
        "notewell": mcp_clients.server_entry()}}
    assert path.stat().st_mode & 0o777 == 0o600
    assert not Path(str(path) + ".notewell-backup").exists()


def test_dry_run_prints_the_change_and_changes_nothing(home, user_home):
    path = cursor_file(user_home)
    path.parent.mkdir()
    path.write_text(json.dumps(OTHER))
    out = mcp_clients.install("cursor", dry_run=True)
    assert out.startswith(f"would change {path}") and '+    "notewell": {' in out
    assert json.loads(path.read_text()) == OTHER
    assert not Path(str(path) + ".notewell-backup").exists()


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"mcpServers": []}'])
def test_a_file_that_is_not_a_config_is_left_alone(home, user_home, text):
    path = cursor_file(user_home)
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(mcp_clients.ClientConfigError, match=str(path)):
        mcp_clients.install("cursor")
    assert path.read_text() == text


def test_claude_code_through_its_own_command_or_printed(home):
    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    out = mcp_clients.install("claude-code", run=run, which=lambda name: None)
    assert "not on PATH" in out and "claude mcp add --env" in out and not calls
    entry = mcp_clients.server_entry()
    mcp_clients.install("claude-code", run=run, which=lambda name: "/usr/bin/claude")
    assert calls == [
        ["claude", "mcp", "remove", "--scope", "user", "notewell"],
        ["claude", "mcp", "add", "--env", f"NOTEWELL_HOME={home}", "--scope", "user",
         "notewell", "--", entry["command"], *entry["args"]]]
    calls.clear()
    assert "would run" in mcp_clients.install("claude-code", dry_run=True, run=run,
                                              which=lambda name: "/usr/bin/claude")
    assert not calls


def test_doctor_says_which_clients_run_this_installation(home, user_home):
    assert doctor.check_mcp_clients("linux").status == "skip"
    mcp_clients.install("cursor")
    check = doctor.check_mcp_clients("linux")
    assert check.status == "ok" and check.detail.startswith("cursor run")
    path = Path(mcp_clients.config_path("claude-desktop", "linux"))
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"mcpServers": {"notewell": {"command": "/old/notewell",
                                                            "args": ["mcp"]}}}))
    check = doctor.check_mcp_clients("linux")
    assert check.status == "warn" and "claude-desktop runs `/old/notewell mcp`" in check.detail
    assert check.fix == "`notewell mcp install --client claude-desktop`"


def test_the_command(home, user_home):
    env = subprocess_env(home, HOME=str(user_home))
    run = [sys.executable, "-m", "notewell", "mcp", "install"]
    out = subprocess.run([*run, "--client", "cursor", "--dry-run"], capture_output=True,
                         text=True, env=env, timeout=60, check=False)
    assert out.returncode == 0 and "would change" in out.stdout
    assert not cursor_file(user_home).exists()
    assert not (home / "mcp-configured").exists()
    out = subprocess.run([*run, "--client", "cursor"], capture_output=True, text=True,
                         env=env, timeout=60, check=False)
    assert out.returncode == 0 and cursor_file(user_home).exists()
    # The daemon loads the MCP server at its start from now on.
    assert (home / "mcp-configured").read_text() == "cursor"
    out = subprocess.run(run, capture_output=True, text=True, env=env, timeout=60,
                         check=False)
    assert out.returncode == 2 and "--client" in out.stderr
