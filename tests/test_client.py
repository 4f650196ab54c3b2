"""The per-keystroke client: always valid Alfred JSON, and nothing heavy imported."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import CLIENT, REPO, modules_loaded_by_client, run_client

HEAVY = ("numpy", "onnxruntime", "tokenizers", "apsw", "sqlite_vec", "msgpack", "json",
         "socket", "notewell.search.searcher", "notewell.index.database",
         "notewell.model.embedding", "notewell.engine")


def test_client_never_imports_the_model_runtime_or_heavy_modules(home):
    loaded = modules_loaded_by_client(home, "hello")
    assert "notewell.wire.client" in loaded
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_daemon_down_is_one_item_that_says_how_to_start(home):
    out = run_client(home, "anything")
    assert out.returncode == 0 and out.stderr == b""
    doc = json.loads(out.stdout)
    assert len(doc["items"]) == 1
    item = doc["items"][0]
    assert "not running" in item["title"] and "notewell" in item["subtitle"]
    assert item["arg"] == "start-daemon" and item["variables"]["action"] == "start"


def test_client_with_unwritable_home_still_prints_json(tmp_path):
    out = subprocess.run([sys.executable, "-IS", str(CLIENT), "x"], capture_output=True,
                         env={"NOTEWELL_HOME": str(tmp_path / "missing" / "deep")}, timeout=10)
    assert out.returncode == 0 and json.loads(out.stdout)["items"]


def test_unknown_format_is_an_item_not_a_crash(home):
    out = run_client(home, "--format", "xml", "q")
    assert out.returncode == 0 and "unknown format" in json.loads(out.stdout)["items"][0]["title"]


def test_client_script_is_executable_and_runs_from_anywhere(home, tmp_path):
    assert CLIENT.stat().st_mode & 0o111
    out = subprocess.run([str(CLIENT), "q"], capture_output=True, cwd=tmp_path,
                         env={"NOTEWELL_HOME": str(home),
                              "PATH": f"{sys.prefix}/bin:/usr/bin:/bin"},
                         timeout=10)
    assert out.returncode == 0 and json.loads(out.stdout)["items"]
    assert REPO.exists()
