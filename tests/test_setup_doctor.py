"""`notewell setup` (discovery, the proposed config, the whole run, re-runs) and
`notewell doctor` (every check passing on a working install, each failure explained)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import subprocess_env
from launcher_helpers import install_stand_ins
from notewell import config
from notewell.index.database import Index
from notewell.index.schema import BuildSettings
from notewell.ingest.chunking import ChunkSettings
from notewell.model.fake import FakeEmbedder
from notewell.ops import doctor, setup
from notewell.wire import paths

BEAR_DB = ("Library/Group Containers/9K33E3U3T4.net.shinyfrog.bear/Application Data/"
           "database.sqlite")


def make_vault(root: Path, notes: dict[str, str]) -> Path:
    (root / ".obsidian").mkdir(parents=True)
    for rel, text in notes.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def register_vaults(user_home: Path, *vaults: Path) -> Path:
    registry = user_home / ".config" / "obsidian" / "obsidian.json"
    registry.parent.mkdir(parents=True)
    registry.write_text(json.dumps({"vaults": {
        f"id{i}": {"path": str(v), "ts": 1700000000000 + i, "open": i == 0}
        for i, v in enumerate(vaults)}}))
    return registry


def test_discover_finds_bear_and_existing_vaults(user_home: Path, tmp_path: Path):
    vault = make_vault(tmp_path / "Work Notes", {"a.md": "# A\n"})
    register_vaults(user_home, vault, tmp_path / "gone")
    bear = user_home / BEAR_DB
    bear.parent.mkdir(parents=True)
    bear.write_bytes(b"")
    found = setup.discover()
    assert found.bear == str(bear)
    assert found.vaults == [str(vault)]
    assert any("gone" in p for p in found.problems)


def test_proposal_keeps_existing_sources_and_is_idempotent(home: Path, user_home: Path,
                                                          tmp_path: Path):
    notes = tmp_path / "notes"
    notes.mkdir()
    work = make_vault(tmp_path / "Work Notes", {"a.md": "# A\n"})
    other = make_vault(tmp_path / "work-notes", {"b.md": "# B\n"})
    current = config.Config((config.SourceConfig("notes", "markdown", str(notes), ("x/**",)),
                             config.SourceConfig("work-notes", "markdown", str(tmp_path))),
                            path=str(home / "config.toml"))
    found = setup.Found(bear="/some/database.sqlite", vaults=[str(work), str(other)])
    proposed, added = setup.propose(current, found)
    assert proposed.sources[:2] == current.sources
    assert [(s.name, s.type, s.path) for s in proposed.sources[2:]] == [
        ("bear", "bear", None), ("work-notes-2", "obsidian", str(work)),
        ("work-notes-3", "obsidian", str(other))]
    assert len(added) == 3
    # What setup wrote parses back, and proposing again adds nothing.
    config.save(proposed, str(home / "config.toml"))
    again, added = setup.propose(config.load(str(home / "config.toml")), found)
    assert added == [] and again.sources == config.load(str(home / "config.toml")).sources


def test_saved_config_reads_back_whatever_the_path_holds(tmp_path: Path):
    # A control character, quotes, backslashes and non-ASCII: all TOML string escapes.
    odd = "/Users/zoë/Notes \"draft\"\\old\x07\ttab\x7f — 日本"
    written = config.Config(
        sources=(config.SourceConfig("notes", "markdown", odd, ("a\\*", 'say "hi"'),
                                     {"pdfs": "all", "pdf_max_mb": 2.5}),
                 config.SourceConfig("bear", "bear", None, (), {"include_archived": True})),
        debug_log=True,
        model=config.ModelConfig(odd, pooling="cls", query_prefix="q:\n"))
    path = str(tmp_path / "config.toml")
    config.save(written, path)
    again = config.load(path)
    assert again.sources == written.sources and again.debug_log
    assert [s.options for s in again.sources] == [s.options for s in written.sources]
    assert again.sources[0].path == odd and again.model == written.model


def test_setup_without_yes_writes_nothing(home: Path, user_home: Path, tmp_path: Path):
    register_vaults(user_home, make_vault(tmp_path / "Vault", {"a.md": "# A\n"}))
    lines: list[str] = []
    assert setup.run(False, say=lines.append, confirm=lambda q: False) == 0
    assert not (home / "config.toml").exists()
    text = "\n".join(lines)
    assert 'type = "obsidian"' in text and "notewell setup --yes" in text


def test_setup_yes_does_everything_and_a_rerun_is_safe(home: Path, user_home: Path,
                                                       tmp_path: Path, monkeypatch):
    stand = install_stand_ins(tmp_path, monkeypatch)
    vault = make_vault(tmp_path / "Vault", {"garden.md": "# Garden\n\nPrune the roses.\n"})
    register_vaults(user_home, vault)
    lines: list[str] = []
    code = setup.run(True, platform="linux", say=lines.append, embedder=FakeEmbedder)
    assert code == 0, "\n".join(lines)
    cfg = config.load()
    assert [(s.name, s.type, s.path) for s in cfg.sources] == [("vault", "obsidian", str(vault))]
    from notewell.index import store

    assert Path(store.current_path()).exists()
    assert (user_home / ".config" / "systemd" / "user" / "notewell.service").exists()
    assert ["--user", "enable", "--now", "notewell.service"] in stand.args("systemctl")
    from notewell.launcher import alfred_workflow

    assert Path(alfred_workflow.default_output()).exists()
    # Again, with one more source added by hand: it is kept, nothing is duplicated.
    extra = tmp_path / "extra"
    extra.mkdir()
    config.save(config.Config((*cfg.sources,
                               config.SourceConfig("extra", "markdown", str(extra)))))
    lines.clear()
    assert setup.run(True, platform="linux", say=lines.append, agent=False,
                     embedder=FakeEmbedder) == 0
    assert [s.name for s in config.load().sources] == ["vault", "extra"]
    assert "config unchanged" in lines


def test_setup_with_nothing_found_says_what_to_do(home: Path, user_home: Path):
    lines: list[str] = []
    assert setup.run(True, platform="linux", say=lines.append, embedder=FakeEmbedder) == 1
    assert "[[sources]]" in "\n".join(lines)


# -- doctor -------------------------------------------------------------------------------


def active_systemd(stand) -> None:
    stand.rules({"systemctl": [{"prefix": ["--user", "show"], "stdout":
                                "LoadState=loaded\nActiveState=active\nSubState=running\n"
                                "MainPID=99\nUnitFileState=enabled\n"}]})


def by_name(checks: list[doctor.Check]) -> dict[str, doctor.Check]:
    return {c.name: c for c in checks}


def test_doctor_all_ok_on_a_working_install(daemon, home: Path, user_home: Path,
                                            tmp_path: Path, monkeypatch):
    stand = install_stand_ins(tmp_path, monkeypatch)
    active_systemd(stand)
    from notewell.launcher import alfred_workflow

    alfred_workflow.build()
    checks = doctor.run(platform="linux", embedder=FakeEmbedder)
    statuses = {c.name: c.status for c in checks}
    from notewell.model.files import MODEL_SHA256
    from notewell.model.runtime import recorded_choice

    # The rewrite is chosen by measuring it here: a machine where it is slower says so.
    rewrite = recorded_choice(MODEL_SHA256)["use"] == "rewrite"
    assert statuses == {"installation": "ok", "sqlite extension": "ok", "model files": "ok",
                        "model in memory": "ok" if rewrite else "warn", "config": "ok",
                        "source notes": "ok", "index": "ok", "daemon": "ok",
                        "disk space": "ok", "socket permissions": "ok",
                        "Time Machine": "skip", "agent": "ok",
                        "alfred workflow": "ok",
                        "alfred client": "ok" if shutil.which("zsh") else "skip",
                        "mcp session": "ok", "mcp clients": "skip",
                        }, [c.line() for c in checks]
    assert "search_notes answered (1 hit)" in by_name(checks)["mcp session"].detail
    assert not doctor.failed(checks)


def test_doctor_explains_each_failure(home: Path, user_home: Path, tmp_path: Path,
                                      monkeypatch, notes_dir: Path):
    stand = install_stand_ins(tmp_path, monkeypatch)
    stand.rules({"launchctl": [{"prefix": ["print"], "rc": 113}]})
    config.save(config.Config((config.SourceConfig("notes", "markdown", str(notes_dir)),
                               config.SourceConfig("gone", "markdown",
                                                   str(tmp_path / "gone")))))
    # An index built by another embedder, and a runtime dir that is too open.
    Index(os.path.join(paths.index_dir(), "index-1.sqlite"),
          BuildSettings(FakeEmbedder(dim=32).fingerprint(), 32, "other-chunker")).close()
    os.makedirs(paths.runtime_dir(), mode=0o755)
    os.chmod(paths.runtime_dir(), 0o755)
    checks = by_name(doctor.run(platform="darwin", embedder=FakeEmbedder))
    assert checks["source notes"].status == "ok"
    assert checks["source gone"].status == "FAIL" and "config.toml" in checks["source gone"].fix
    assert checks["index"].status == "FAIL" and "--rebuild" in checks["index"].fix
    assert checks["daemon"].status == "FAIL" and "agent start" in checks["daemon"].fix
    assert checks["socket permissions"].status == "FAIL"
    assert "755" in checks["socket permissions"].detail
    assert checks["agent"].status == "FAIL" and "agent install" in checks["agent"].fix
    assert checks["alfred workflow"].status == "FAIL"
    assert "alfred build" in checks["alfred workflow"].fix
    assert checks["mcp session"].status == "skip"
    if shutil.which("zsh"):  # no daemon: zsh's socket module is what can be checked
        assert checks["alfred client"].status == "ok", checks["alfred client"].line()
    for check in checks.values():
        if check.status == "FAIL":
            assert check.fix and " -> " in check.line()


def test_doctor_index_check_by_schema_version(home: Path, monkeypatch):
    """An older schema is upgraded in place when next opened (a warning with the step);
    a newer one than this notewell knows cannot be read (a failure)."""
    from notewell.index.schema import SCHEMA_VERSION, connect

    embedder = FakeEmbedder()
    path = os.path.join(paths.index_dir(), "index-1.sqlite")
    Index(path, BuildSettings(embedder.fingerprint(), embedder.dim,
                              ChunkSettings().fingerprint())).close()
    assert doctor.check_index(FakeEmbedder).status == "ok"
    for version, status, step in ((SCHEMA_VERSION - 1, "warn", "agent restart"),
                                  (SCHEMA_VERSION + 1, "FAIL", "upgrade notewell")):
        db = connect(path)
        db.execute(f"PRAGMA user_version={version}")
        db.close()
        check = doctor.check_index(FakeEmbedder)
        assert check.status == status and step in check.fix, check.line()
        assert f"schema {version}" in check.detail


def test_doctor_index_cut_by_another_chunker_is_a_warning_not_a_failure(home: Path):
    """After an upgrade that changes the chunker the index still answers, and the daemon's
    next sync re-chunks it: nothing for the user to rebuild by hand."""
    embedder = FakeEmbedder()
    path = os.path.join(paths.index_dir(), "index-1.sqlite")
    Index(path, BuildSettings(embedder.fingerprint(), embedder.dim,
                              ChunkSettings(max_pieces=99).fingerprint())).close()
    check = doctor.check_index(FakeEmbedder)
    assert check.status == "warn" and "re-chunks" in check.detail, check.line()
    assert "--rebuild" not in check.fix


def test_unreadable_bear_database_asks_for_full_disk_access(monkeypatch):
    class Locked:
        def scan(self):
            raise PermissionError(1, "Operation not permitted", "/Users/a/Library/Group "
                                  "Containers/9K33E3U3T4.net.shinyfrog.bear/database.sqlite")

    import notewell.sources

    monkeypatch.setattr(notewell.sources, "open_source", lambda cfg: Locked())
    check = doctor.check_source(config.SourceConfig("bear", "bear"), "darwin")
    assert check.status == "FAIL" and "Full Disk Access" in check.fix
    assert os.path.realpath(sys.executable) in check.fix


def test_doctor_cli_exits_non_zero_and_prints_one_line_per_check(home: Path, user_home: Path,
                                                                  tmp_path: Path,
                                                                  monkeypatch):
    stand = install_stand_ins(tmp_path, monkeypatch)
    env = subprocess_env(home, **stand.env(), HOME=str(user_home))
    out = subprocess.run([sys.executable, "-m", "notewell", "doctor"], capture_output=True,
                         text=True, env=env, timeout=60)
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert lines[0].startswith("ok   installation: notewell ")
    assert lines[1].startswith("ok   sqlite extension")
    assert any(line.startswith("FAIL config") and "notewell setup" in line for line in lines)
    assert all(line.split()[0] in ("ok", "warn", "FAIL", "skip") for line in lines)


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
def test_doctor_flags_a_zsh_client_that_cannot_answer_by_itself(tmp_path: Path, monkeypatch):
    from notewell.launcher import alfred_workflow

    broken = tmp_path / "notewell-query.zsh"
    broken.write_text("exec $NOTEWELL_PYTHON\n")  # always falls back
    inst = alfred_workflow.Installation(client=str(tmp_path / "q"), fast_client=str(broken))
    monkeypatch.setattr(alfred_workflow, "this_installation", lambda: inst)
    mac = doctor.check_fast_client("darwin", daemon_up=True)
    assert mac.status == "FAIL" and "Python client answers instead" in mac.detail and mac.fix
    assert doctor.check_fast_client("linux", daemon_up=True).status == "skip"
    no_zsh = alfred_workflow.Installation(client="notewell-query")
    monkeypatch.setattr(alfred_workflow, "this_installation", lambda: no_zsh)
    damaged = doctor.check_fast_client("darwin", daemon_up=True)
    assert damaged.status == "FAIL" and "missing" in damaged.detail
    assert doctor.check_fast_client("linux", daemon_up=True).status == "skip"
