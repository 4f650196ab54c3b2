"""macOS privacy controls, diagnosed: a source the system refuses (EPERM, or SQLite's
"unable to open database file" over it) is "not allowed", told from "not there" (ENOENT)
by errno, and ``doctor`` names the program to allow: a framework Python's Python.app (from
``sys.base_prefix``), else the real executable. The refusals are faked (these tests run
where root may read anything)."""

from __future__ import annotations

import errno
import os
import sqlite3
import sys
from pathlib import Path

import pytest
from bear_fixture import build
from notewell import config
from notewell.ops import doctor, privacy
from notewell.sources.base import DENIED, SourceDenied, SourceError
from notewell.sources.bear import DEFAULT_LOCATIONS, BearSource


def refuse(monkeypatch, path: Path, calls: tuple[str, ...] = ("stat", "open", "scandir")):
    """Make ``path`` answer EPERM, as macOS privacy controls do, to the given calls."""
    refused = os.fspath(path)
    for call in calls:
        real = getattr(os, call)

        def fake(p, *args, _real=real, **kwargs):
            if os.fspath(p) == refused:
                raise PermissionError(errno.EPERM, "Operation not permitted", refused)
            return _real(p, *args, **kwargs)

        monkeypatch.setattr(os, call, fake)


def make_bear_db(path: Path) -> Path:
    build(str(path)).close()
    return path


def framework(root: Path, prefix: str) -> Path:
    app = root / prefix.strip("/") / "Resources" / "Python.app"
    (app / "Contents" / "MacOS").mkdir(parents=True)
    return app


# -- which program needs the grant --------------------------------------------------------------


def test_homebrew_python_is_its_frameworks_python_app_resolved(tmp_path: Path):
    cellar = "opt/homebrew/Cellar/python@3.12/3.12.4/Frameworks/Python.framework/Versions/3.12"
    app = framework(tmp_path, cellar)
    opt = tmp_path / "opt/homebrew/opt/python@3.12"
    opt.parent.mkdir(parents=True)
    opt.symlink_to(tmp_path / "opt/homebrew/Cellar/python@3.12/3.12.4")
    base = opt / "Frameworks/Python.framework/Versions/3.12"  # as sys.base_prefix reads
    assert privacy.grant_target(str(base), str(base / "bin/python3.12")) == str(app)
    hint = privacy.grant_hint("darwin", "/x", base_prefix=str(base),
                              executable=str(base / "bin/python3.12"))
    assert str(app) in hint and "bin/python3" not in hint
    assert "Full Disk Access" in hint and "brew upgrade python" in hint
    assert "notewell agent restart" in hint


def test_a_command_refused_in_a_terminal_names_the_terminal_too(tmp_path: Path):
    base = tmp_path / "Library/Frameworks/Python.framework/Versions/3.12"
    app = framework(tmp_path, "Library/Frameworks/Python.framework/Versions/3.12")
    hint = privacy.grant_hint("darwin", base_prefix=str(base), executable="/x",
                              environ={"TERM_PROGRAM": "Apple_Terminal"})
    assert str(app) in hint and "Terminal (this command runs in it)" in hint
    hint = privacy.grant_hint("darwin", base_prefix=str(base), executable="/x",
                              environ={"TERM_PROGRAM": "Apple_Terminal"}, daemon_only=True)
    assert str(app) in hint and "Terminal" not in hint


def test_python_org_python_is_its_python_app_without_the_homebrew_note(tmp_path: Path):
    base = tmp_path / "Library/Frameworks/Python.framework/Versions/3.12"
    app = framework(tmp_path, "Library/Frameworks/Python.framework/Versions/3.12")
    hint = privacy.grant_hint("darwin", base_prefix=str(base),
                              executable=str(base / "bin/python3"))
    assert str(app) in hint and "brew" not in hint


def test_other_pythons_are_their_real_executable(tmp_path: Path):
    base = tmp_path / ".pyenv/versions/3.12.4"  # pyenv, uv: no framework
    (base / "bin").mkdir(parents=True)
    real = base / "bin/python3.12"
    real.write_text("")
    venv = tmp_path / "venv/bin/python"
    venv.parent.mkdir(parents=True)
    venv.symlink_to(real)
    assert privacy.grant_target(str(base), str(venv)) == str(real)
    # A prefix that names a framework but holds no Python.app: the executable, too.
    assert privacy.grant_target(str(tmp_path / "Python.framework/Versions/3.12"),
                                str(venv)) == str(real)


def test_off_macos_the_fix_is_the_files_permissions():
    hint = privacy.grant_hint("linux", "/srv/notes")
    assert "System Settings" not in hint and "ls -ld /srv/notes" in hint


# -- not there or not allowed -------------------------------------------------------------------


def test_diagnose_tells_missing_from_refused_by_errno(tmp_path: Path, monkeypatch):
    notes = tmp_path / "Documents"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n")
    assert privacy.diagnose(str(notes)) is None
    assert privacy.diagnose(str(tmp_path / "gone"))[0] == "not there"
    refuse(monkeypatch, notes, ("scandir",))  # listed by its parent, stat works
    what, error = privacy.diagnose(str(notes))
    assert what == "not allowed" and error.errno == errno.EPERM
    refuse(monkeypatch, notes / "a.md", ("open",))
    assert privacy.diagnose(str(notes / "a.md"))[0] == "not allowed"


def test_bear_refused_by_sqlite_is_not_allowed_not_missing(tmp_path: Path, monkeypatch):
    db = make_bear_db(tmp_path / "bear" / "database.sqlite")
    source = BearSource(config.SourceConfig("bear", "bear", str(db)))

    def cannot_open(*args, **kwargs):
        raise sqlite3.OperationalError("unable to open database file")

    # stat works, SQLite cannot open it, and neither can we: a privacy refusal.
    monkeypatch.setattr(sqlite3, "connect", cannot_open)
    refuse(monkeypatch, db, ("open",))
    with pytest.raises(SourceDenied) as denied:
        list(source.scan())
    assert str(denied.value).startswith(DENIED) and denied.value.path == str(db)
    assert "does not exist" not in str(denied.value)


def test_bear_whose_stat_is_refused_is_not_allowed(tmp_path: Path, monkeypatch):
    db = make_bear_db(tmp_path / "bear" / "database.sqlite")
    refuse(monkeypatch, db)
    source = BearSource(config.SourceConfig("bear", "bear", str(db)))
    with pytest.raises(SourceDenied):
        list(source.scan())
    # Really missing is still missing, with the config fix.
    gone = BearSource(config.SourceConfig("bear", "bear", str(tmp_path / "nope.sqlite")))
    with pytest.raises(SourceError, match="does not exist") as missing:
        list(gone.scan())
    assert not isinstance(missing.value, SourceDenied)


def test_bears_default_location_refused_is_not_allowed(user_home: Path, monkeypatch):
    db = make_bear_db(Path(os.path.expanduser(DEFAULT_LOCATIONS[0])))
    refuse(monkeypatch, db)
    source = BearSource(config.SourceConfig("bear", "bear"))
    with pytest.raises(SourceDenied, match="Group Containers"):
        list(source.scan())


# -- doctor ---------------------------------------------------------------------------------------


@pytest.fixture
def homebrew(tmp_path: Path, monkeypatch) -> Path:
    base = "opt/homebrew/Cellar/python@3.12/3.12.4/Frameworks/Python.framework/Versions/3.12"
    app = framework(tmp_path, base)
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path / base))
    return app


def test_doctor_names_python_app_for_a_refused_bear(tmp_path: Path, monkeypatch,
                                                   homebrew: Path):
    db = make_bear_db(tmp_path / "bear" / "database.sqlite")
    refuse(monkeypatch, db)
    check = doctor.check_source(config.SourceConfig("bear", "bear", str(db)), "darwin")
    assert check.status == "FAIL" and "not allowed" in check.detail
    assert str(homebrew) in check.fix and "config.toml" not in check.fix
    gone = doctor.check_source(config.SourceConfig("bear", "bear", str(tmp_path / "x")),
                               "darwin")
    assert "does not exist" in gone.detail and "config.toml" in gone.fix


def test_doctor_tells_a_refused_folder_from_a_missing_one(tmp_path: Path, monkeypatch,
                                                          homebrew: Path):
    notes = tmp_path / "Documents" / "notes"
    notes.mkdir(parents=True)
    (notes / "a.md").write_text("# A\n")
    cfg = config.SourceConfig("notes", "markdown", str(notes))
    assert doctor.check_source(cfg, "darwin").status == "ok"
    refuse(monkeypatch, notes, ("scandir",))
    check = doctor.check_source(cfg, "darwin")
    assert check.status == "FAIL" and check.detail.startswith("not allowed: ")
    assert str(homebrew) in check.fix
    missing = config.SourceConfig("notes", "markdown", str(tmp_path / "moved"))
    check = doctor.check_source(missing, "darwin")
    assert check.detail.startswith("not there: ") and "config.toml" in check.fix


def test_doctor_shows_what_the_daemon_was_refused(monkeypatch, homebrew: Path):
    # doctor runs in a terminal that may have the grant the agent's daemon lacks.
    from notewell.wire import client

    status = {"ok": True, "result": {"sources": [
        {"name": "bear", "path": None, "last_error": f"{DENIED} Bear's database /db"},
        {"name": "notes", "path": "/n", "last_error": None}]}}
    monkeypatch.setattr(client, "ask", lambda request, timeout: status)
    monkeypatch.setenv("TERM_PROGRAM", "iTerm.app")
    (check,) = doctor.check_daemon_sources("darwin", doctor.daemon_status())
    assert check.status == "FAIL" and check.name == "daemon reads bear"
    assert str(homebrew) in check.fix and "iTerm" not in check.fix


def test_setup_says_bears_database_is_refused_not_missing(home: Path, user_home: Path,
                                                         monkeypatch, homebrew: Path):
    from notewell.ops import setup

    db = make_bear_db(Path(os.path.expanduser(DEFAULT_LOCATIONS[0])))
    (user_home / "notes").mkdir()
    refuse(monkeypatch, db)
    lines: list[str] = []
    setup.run(platform="darwin", say=lines.append, confirm=lambda q: False)
    said = "\n".join(lines)
    assert "Bear's database is there but not allowed" in said and str(homebrew) in said
    assert "no Bear database found" not in said
