"""An upgrade in place while the daemon runs: the next keystroke, from the upgraded
package's client, makes the old daemon restart itself into the new files (same process,
``execv``), the keystroke is answered, and nothing is embedded again.

The "installation" is a copy of the package in a temporary site folder (``PYTHONPATH``),
bumped to another version the way an upgrade replaces the files. tests/test_install.py
does the same with real wheels installed by pip."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, DaemonProcess, notewell_command, subprocess_env
from notewell import __version__
from notewell.wire import protocol

NEW = "9.9.9"


def copy_package(site: Path) -> Path:
    shutil.copytree(REPO / "daemon" / "notewell", site / "notewell",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return site / "notewell"


def bump_version(package: Path, version: str) -> None:
    """What an upgrade does to the files that carry the version."""
    for rel, prefix, fmt in (("__init__.py", "__version__ = ", '"{}"'),
                             ("launcher/scripts/notewell-query.zsh",
                              "typeset -g _notewell_version=", "{}")):
        path = package / rel
        lines = path.read_text().splitlines(keepends=True)
        lines = [prefix + fmt.format(version) + "\n" if line.startswith(prefix) else line
                 for line in lines]
        path.write_text("".join(lines))


def wait_for(d: DaemonProcess, want, timeout: float = 30):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = d.ask("status")
            if want(last):
                return last["result"]
        except (OSError, protocol.ProtocolError):
            pass
        time.sleep(0.05)
    raise AssertionError(f"daemon never got there: {last}; log: {d.log.read_text()[-2000:]}")


def synced(version: str):
    return lambda r: (r.get("ok") and r["result"].get("version") == version
                      and r["result"].get("state") == "ready"
                      and r["result"].get("last_reports"))


@pytest.fixture
def old_daemon(home: Path, notes_config, tmp_path: Path):
    site = tmp_path / "site"
    package = copy_package(site)
    env = subprocess_env(home, PYTHONPATH=str(site))
    log = home / "daemon-upgrade.log"
    with open(log, "ab") as f:
        proc = subprocess.Popen(notewell_command("serve", "--poll", "0.5"), env=env,
                                stdout=f, stderr=f, stdin=subprocess.DEVNULL)
    d = DaemonProcess(home, proc, log)
    try:
        first = wait_for(d, synced(__version__))
        assert sum(r["embedded"] for r in first["last_reports"]) > 0
        yield d, package
    finally:
        d.stop()


def keystroke(package: Path, home: Path, query: str, zsh: bool) -> dict:
    scripts = package / "launcher" / "scripts"
    env = subprocess_env(home, NOTEWELL_PYTHON=sys.executable)
    cmd = ([shutil.which("zsh") or "zsh", "-f", str(scripts / "notewell-query.zsh"), query]
           if zsh else [sys.executable, "-IS", str(scripts / "notewell-query"), query])
    out = subprocess.run(cmd, capture_output=True, env=env, timeout=30, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("zsh", [False, pytest.param(True, marks=pytest.mark.skipif(
    not shutil.which("zsh"), reason="zsh is not installed"))], ids=["python", "zsh"])
def test_the_first_keystroke_after_an_upgrade_restarts_the_daemon_into_it(old_daemon, home,
                                                                           zsh):
    d, package = old_daemon
    pid = d.ask("ping")["result"]["pid"]
    bump_version(package, NEW)
    doc = keystroke(package, home, "lisbon tram", zsh)
    titles = [item["title"] for item in doc["items"]]
    # Either the new daemon's answer, or its "starting…" while it loads (Alfred re-runs).
    assert titles[0] == "Lisbon weekend" or (titles == ["notewell is starting…"]
                                             and doc.get("rerun")), doc
    after = wait_for(d, synced(NEW))
    assert after["pid"] == pid, "the daemon restarts in its own process (an agent's job)"
    assert d.proc.poll() is None
    assert sum(r["embedded"] for r in after["last_reports"]) == 0, after["last_reports"]
    assert keystroke(package, home, "lisbon tram", zsh)["items"][0]["title"] == \
        "Lisbon weekend"


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
def test_the_workflows_own_older_client_still_restarts_the_daemon(old_daemon, home, tmp_path):
    """The Alfred workflow carries a copy of the zsh client of the version that built it:
    after an upgrade in place it asks as the old version, which the old daemon also is.
    The daemon sees the newer files on disk and restarts into them; the keystroke is
    answered through the installation the home records, and the next ones too."""
    d, package = old_daemon
    pid = d.ask("ping")["result"]["pid"]
    wf = tmp_path / "wf"
    wf.mkdir()
    for name in ("notewell-query.zsh", "notewell-run.zsh"):  # version A's
        shutil.copy(package / "launcher" / "scripts" / name, wf)
    bump_version(package, NEW)
    # Whatever the home records (the daemon records itself again when it restarts) runs
    # the upgraded package: PYTHONPATH stands for the installation's own site-packages.
    env = {k: v for k, v in subprocess_env(home, PYTHONPATH=str(package.parent)).items()
           if k != "NOTEWELL_PYTHON"}

    def keystroke_from_the_workflow(query: str) -> dict:
        out = subprocess.run([shutil.which("zsh") or "zsh", "-c",
                              'source ./notewell-query.zsh "$1"', "zsh", query], cwd=wf,
                             capture_output=True, env=env, timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    titles = [i["title"] for i in keystroke_from_the_workflow("lisbon tram")["items"]]
    assert titles[0] == "Lisbon weekend" or titles == ["notewell is starting…"], titles
    after = wait_for(d, synced(NEW))
    assert after["pid"] == pid and d.proc.poll() is None
    assert sum(r["embedded"] for r in after["last_reports"]) == 0, after["last_reports"]
    # The restarted daemon recorded its client, the upgraded package's; the workflow's
    # old copy hands over to it, so zsh answers by itself: the installation (Python) is
    # not run, though it would fail.
    client = package / "launcher" / "scripts" / "notewell-query.zsh"
    assert (home / "notewell-client").read_text() == str(client.resolve())
    ran = tmp_path / "python-ran"
    fails = tmp_path / "notewell"
    fails.write_text(f'#!/bin/sh\necho "$@" >> "{ran}"\nexit 1\n')
    fails.chmod(0o755)
    (home / "notewell-command").write_text(json.dumps([str(fails)]))
    assert keystroke_from_the_workflow("lisbon tram")["items"][0]["title"] == \
        "Lisbon weekend"
    assert not ran.exists()


def test_an_upgrade_that_cuts_notes_differently_re_chunks_the_index_on_its_own(old_daemon,
                                                                                home):
    """No `notewell index --rebuild` after such an upgrade: the restarted daemon rebuilds
    the index beside the old one and switches to it."""
    d, package = old_daemon
    before = d.ask("status")["result"]["chunker"]
    chunking = package / "ingest" / "chunking.py"
    text = chunking.read_text()
    assert "    max_pieces: int = 170\n" in text
    chunking.write_text(text.replace("    max_pieces: int = 170\n", "    max_pieces: int = 60\n"))
    bump_version(package, NEW)
    keystroke(package, home, "lisbon tram", zsh=False)
    after = wait_for(d, lambda r: synced(NEW)(r) and r["result"]["chunker"] != before)
    assert "max_pieces=60" in after["chunker"] and after["notes"] > 0
    assert keystroke(package, home, "lisbon tram", zsh=False)["items"][0]["title"] == \
        "Lisbon weekend"


def test_the_upgrade_to_title_vectors_re_chunks_embedding_only_the_titles(home, notes_config,
                                                                        tmp_path):
    """From a notewell without title vectors (chunker version 1) to one with them: the
    restarted daemon re-chunks the index beside on its own, and the model reads nothing
    but the notes' titles (each with its path), every passage vector reused."""
    site = tmp_path / "site"
    package = copy_package(site)
    chunking = package / "ingest" / "chunking.py"
    text = chunking.read_text()
    assert "    version: int = 3\n" in text
    chunking.write_text(text.replace("    version: int = 3\n", "    version: int = 1\n"))
    record = tmp_path / "embedded.txt"
    env = subprocess_env(home, PYTHONPATH=str(site))
    log = home / "daemon-titles.log"
    with open(log, "ab") as f:
        proc = subprocess.Popen(notewell_command("serve", "--poll", "0.5", record=record),
                                env=env, stdout=f, stderr=f, stdin=subprocess.DEVNULL)
    d = DaemonProcess(home, proc, log)
    try:
        before = wait_for(d, synced(__version__))["chunker"]
        assert before.endswith("version=1")
        passages = record.read_text().splitlines()
        chunking.write_text(text)  # the upgrade: version 3 again (2 brought the titles)
        bump_version(package, NEW)
        keystroke(package, home, "lisbon tram", zsh=False)
        after = wait_for(d, lambda r: synced(NEW)(r) and r["result"]["chunker"] != before)
        assert after["chunker"].endswith("version=3") and after["notes"] == 4
        embedded = record.read_text().splitlines()[len(passages):]
        titles = {"Banana bread\nkitchen/banana-bread", "Lisbon weekend\ntravel/lisbon",
                  "Postgres vacuum\ndb/postgres-vacuum", "Undo the last commit\ngit/undo-commit"}
        hashes = {hashlib.sha256(t.encode()).hexdigest() for t in titles}
        assert hashes <= set(embedded) and not set(embedded) & set(passages)
        # Besides the titles, only the keystroke's query was embedded.
        assert len(set(embedded) - hashes) <= 1
        assert sum(r["embedded"] for r in after["last_reports"]) == len(titles)
    finally:
        d.stop()


def test_a_client_of_another_installation_is_told_what_to_run(old_daemon, home, tmp_path):
    d, _ = old_daemon
    other = copy_package(tmp_path / "other-site")
    bump_version(other, NEW)  # the daemon's own files stay as they are: no restart
    doc = keystroke(other, home, "lisbon", zsh=False)
    (item,) = doc["items"]
    assert "another installation" in item["title"]
    assert "notewell agent install" in item["subtitle"] and __version__ in item["subtitle"]
    assert d.ask("ping")["result"]["version"] == __version__
    assert d.proc.poll() is None
