"""A second, independent MCP client: the MCP Inspector's CLI mode (TypeScript SDK) against
``notewell mcp`` and a real daemon. Skips where npx is missing or npm cannot fetch the
Inspector. Slow (each call starts Node and npx; the first fetches the package)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# The newest Inspector that runs on Node 20 (later ones declare node >= 22.7.5).
INSPECTOR = "@modelcontextprotocol/inspector@0.15.0"

pytestmark = [pytest.mark.install,
              pytest.mark.skipif(shutil.which("npx") is None, reason="npx is not installed")]


def notewell_script() -> str:
    script = Path(sys.executable).parent / "notewell"
    if not script.exists():
        pytest.skip("no notewell script beside this interpreter (not an installed venv)")
    return str(script)


def inspect(home: Path, *method: str) -> dict:
    cmd = ["npx", "-y", INSPECTOR, "--cli", "-e", f"NOTEWELL_HOME={home}",
           notewell_script(), "mcp", "--no-start", *method]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False,
                             env={**os.environ, "npm_config_update_notifier": "false"})
    except subprocess.TimeoutExpired:
        pytest.skip("the MCP Inspector did not run within 300 s (npm unreachable?)")
    if out.returncode != 0 and not out.stdout.lstrip().startswith("{"):
        if any(s in out.stderr for s in ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "E404",
                                         "ECONNREFUSED", "network", "npm ERR")):
            pytest.skip(f"npm cannot fetch {INSPECTOR}: {out.stderr.strip()[-300:]}")
        raise AssertionError(f"inspector failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def test_the_inspector_lists_and_calls_the_tools(daemon, home):
    listed = inspect(home, "--method", "tools/list")
    names = {t["name"] for t in listed["tools"]}
    assert names == {"search_notes", "get_note", "similar_notes", "recent_notes",
                     "list_tags", "index_status"}
    for tool in listed["tools"]:
        assert tool["annotations"]["readOnlyHint"] is True and tool["outputSchema"]
    found = inspect(home, "--method", "tools/call", "--tool-name", "search_notes",
                    "--tool-arg", "query=vacuum planner")
    assert not found.get("isError"), found
    hit = found["structuredContent"]["hits"][0]
    assert hit["title"] == "Postgres vacuum"
    note = inspect(home, "--method", "tools/call", "--tool-name", "get_note",
                   "--tool-arg", f"note_id={hit['note_id']}")
    assert "VACUUM ANALYZE" in note["structuredContent"]["text"]
    bad = inspect(home, "--method", "tools/call", "--tool-name", "get_note",
                  "--tool-arg", "note_id=notes:nope.md")
    assert bad["isError"] and "no note with id 'notes:nope.md'" in bad["content"][0]["text"]
    templates = inspect(home, "--method", "resources/templates/list")
    assert templates["resourceTemplates"][0]["uriTemplate"] == "notewell://note/{note_id}"
