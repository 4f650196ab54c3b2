"""A full disk: said in words by the daemon's start, ``status``, ``doctor`` and Alfred, and
a failed build gives its room back.

Two kinds of test: a real full disk (an 8 MB tmpfs, mounted when this runs as root, skipped
cleanly elsewhere) and the same failures injected (``OSError`` ENOSPC,
``apsw.FullError``), which run everywhere."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest
from helpers import REPO, notewell_command, write_notes
from notewell import config
from notewell.engine import Engine, rebuild
from notewell.index import failures, store, writer
from notewell.index.database import Index
from notewell.model.fake import FakeEmbedder
from notewell.ops import doctor, running
from notewell.ops import login_agent as agent
from notewell.serve import background, transport
from notewell.sources import open_source
from notewell.wire import paths
from reliability_helpers import inproc_daemon, markdown_config, write_corpus

FULL = "is full: free"


def _open_build_files() -> list[str]:
    """Files of a build this process still has open (a deleted WAL keeps its room)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if "building-" in target:
                found.append(target)
    return found


def _leftovers(directory: str) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.startswith("building-"))


# -- injected: these run everywhere -------------------------------------------------------


def test_a_full_disk_is_told_from_other_failures_and_said_in_words(tmp_path):
    assert failures.disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert failures.disk_full(apsw.FullError("database or disk is full"))
    try:
        try:
            raise apsw.FullError("database or disk is full")
        except apsw.Error as e:
            raise RuntimeError("sync failed") from e
    except RuntimeError as wrapped:
        assert failures.disk_full(wrapped)
    assert not failures.disk_full(OSError(errno.EACCES, "denied"))
    assert not failures.disk_full(apsw.CorruptError("malformed"))
    assert failures.damaged(apsw.CorruptError("malformed"))
    message = failures.disk_full_message(str(tmp_path / "not-yet" / "index"))
    assert message.startswith(f"the disk holding {tmp_path / 'not-yet' / 'index'} {FULL} ")
    assert " MB; make room on it" in message


def test_a_rebuild_that_fails_for_want_of_space_deletes_what_it_made(tmp_path, notes_dir,
                                                                     monkeypatch):
    cfg = config.Config(sources=(config.SourceConfig("notes", "markdown", str(notes_dir)),))
    d = str(tmp_path / "index")
    model = FakeEmbedder()
    Engine(cfg, embedder=model, index_dir=d).sync()
    live = store.current_path(d)
    real = Index.replace_note

    def full(self, *args, **kwargs):
        if "building-" in self.path:
            raise apsw.FullError("database or disk is full")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Index, "replace_note", full)
    with pytest.raises(apsw.FullError):
        rebuild([open_source(s) for s in cfg.sources], model, Engine(
            cfg, embedder=model, index_dir=d).chunker, d)
    assert _leftovers(d) == [] and _open_build_files() == []
    assert store.current_path(d) == live  # the live index answers as before


def test_leftovers_of_a_crash_are_cleaned_at_start_only_ours_and_only_when_free(tmp_path):
    d = tmp_path / "index"
    d.mkdir()
    for name in ("index-3.sqlite", "index-2.sqlite-wal", "index-3.sqlite-wal",
                 "building-4.sqlite", "building-4.sqlite-wal", "building-4.sqlite-shm",
                 "building-2.sqlite", "building-4.sqlite.unfinished",
                 "index-1.sqlite.corrupt-20250101-000000", "notes.txt"):
        (d / name).write_bytes(b"x")
    # Another process writes (it holds the writer lock): nothing is touched.
    fd = os.open(writer.lock_path(str(d)), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert store.clean_leftovers(str(d)) == []
    finally:
        os.close(fd)
    removed = store.clean_leftovers(str(d))
    assert sorted(removed) == ["building-2.sqlite", "building-4.sqlite",
                               "building-4.sqlite-shm", "building-4.sqlite-wal",
                               "building-4.sqlite.unfinished", "index-2.sqlite-wal"]
    assert sorted(os.listdir(d)) == ["index-1.sqlite.corrupt-20250101-000000",
                                     "index-3.sqlite", "index-3.sqlite-wal", "notes.txt",
                                     "writer.lock"]
    # A build stopped on purpose (closed: no WAL beside it) waits for the next try.
    (d / "building-4.sqlite").write_bytes(b"x")
    assert store.clean_leftovers(str(d)) == []


def test_the_daemon_cleans_leftovers_when_it_starts(home, tmp_path):
    root = write_corpus(tmp_path / "notes", 3)
    cfg = markdown_config(root)
    index_dir = Path(paths.index_dir())
    index_dir.mkdir(parents=True)
    for name in ("building-7.sqlite", "building-7.sqlite-wal"):
        (index_dir / name).write_bytes(b"x" * 1000)
    with inproc_daemon(cfg):
        assert _leftovers(str(index_dir)) == []


def test_a_sync_failing_for_want_of_space_shows_in_status_doctor_and_alfred(
        home, tmp_path, monkeypatch):
    root = write_corpus(tmp_path / "notes", 6)
    cfg = markdown_config(root)
    with inproc_daemon(cfg) as d:
        def full(self, *args, **kwargs):
            raise apsw.FullError("database or disk is full")

        monkeypatch.setattr(Index, "replace_note", full)
        (root / "new.md").write_text("# New\n\nzq99x a note written while the disk is full\n")
        with pytest.raises(background.SyncError):
            d.background.wait_for_sync()
        status = d.handlers.handle({"op": "status"})["result"]
        error = status["sources"][0]["last_error"]
        assert error and f"the disk holding {d.background.engine.index_dir} {FULL}" in error
        assert status["disk_full"] == error
        alfred = json.loads(d.handlers.handle(
            {"op": "search", "query": "zq1x", "format": "alfred"})["result"]["alfred"])
        assert FULL in alfred["items"][0]["subtitle"]  # at once, not after a minute
        check = doctor.check_disk(status)
        assert check.status == "FAIL" and FULL in check.detail and "make room" in check.fix
        monkeypatch.undo()  # room again: the next try succeeds by itself
        d.background.wait_for_sync()
        status = d.handlers.handle({"op": "status"})["result"]
        assert status["sources"][0]["last_error"] is None and status["disk_full"] is None


def test_an_engine_that_cannot_open_for_want_of_space_says_so(home, caplog):
    def engine():
        raise apsw.FullError("database or disk is full")

    bg = background.Background(engine, stop_event=__import__("threading").Event())
    with caplog.at_level("ERROR"):
        assert not bg.start_engine()
    assert bg.state == "error" and f"the disk holding {paths.index_dir()} {FULL}" in bg.problem
    assert "agent restart" in bg.problem and FULL in caplog.text


def test_the_daemon_lock_holds_when_its_pid_cannot_be_written(home, monkeypatch):
    def no_room(fd, data, offset):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(transport.os, "pwrite", no_room)
    path = str(home / "lock")
    fd = transport.acquire_lock(path)
    try:
        with pytest.raises(transport.AlreadyRunning):
            transport.acquire_lock(path)
    finally:
        os.close(fd)


def test_doctor_says_how_much_room_is_left(home, monkeypatch):
    monkeypatch.setattr(failures, "free_bytes", lambda path: 3 * failures.MB)
    check = doctor.check_disk()
    assert check.status == "FAIL" and check.detail == (
        f"the disk holding {paths.index_dir()} {FULL} 3 MB")
    monkeypatch.setattr(failures, "free_bytes", lambda path: 5000 * failures.MB)
    assert doctor.check_disk().status == "ok"
    assert doctor.check_disk({"disk_full": "the disk ... is full"}).status == "FAIL"


def test_agent_start_does_not_claim_started_when_the_daemon_dies_at_once(
        home, user_home, monkeypatch):
    monkeypatch.setattr(agent, "program", lambda python=None: [
        sys.executable, "-c", "import sys; print('notewell: could not start: boom', "
        "file=sys.stderr); sys.exit(1)"])
    with pytest.raises(agent.AgentError, match=r"exited at once \(code 1\).*boom"):
        agent.start("linux")


def test_waiting_for_a_spawned_daemon_reads_its_state_not_a_pause():
    class Proc:
        pid = 42
        polls = 0

        def poll(self):
            self.polls += 1
            return None

    answers = iter([OSError("no socket yet"), {"ok": True, "result": {
        "pid": 42, "state": "warming"}}, {"ok": True, "result": {"pid": 42, "state": "error"}},
        {"ok": True, "result": {"problem": "the disk holding /x is full: free 0 MB"}}])

    def ask(request, timeout):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    now = running.wait_started(Proc(), ask=ask, sleep=lambda s: None, clock=lambda: 0.0)
    assert now["state"] == "error" and FULL in now["problem"]


# -- a real full disk: a small tmpfs -------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path):
    """An 8 MB file system of its own (tmpfs: room for a small index and its WAL), or a
    clean skip where mounting is not allowed (not root, no mount namespace)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / "disk"
    where.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(where)],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot mount a tmpfs here: {e}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def _fill(disk: Path) -> Path:
    """Fill the disk to its last byte; the filler file, to delete for room again."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        for size in (1 << 16, 4096, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    assert failures.free_bytes(str(disk)) == 0
    return filler


def _notes(root: Path, n: int, words: int = 40) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"n{i:03d}.md").write_text(
            f"# Note zq{i}x\n\n" + " ".join(f"word{(i * 7 + j) % 997}" for j in range(words))
            + "\n", encoding="utf-8")
    return root


def test_on_a_full_disk_a_failed_rebuild_gives_its_room_back(small_disk, tmp_path):
    cfg = config.Config(sources=(config.SourceConfig("notes", "markdown",
                                                     str(_notes(tmp_path / "notes", 30))),))
    d = str(small_disk / "index")
    model = FakeEmbedder()
    engine = Engine(cfg, embedder=model, index_dir=d)
    engine.sync()
    engine.index.checkpoint()  # open meanwhile, as a daemon holds it: its WAL files exist
    filler = _fill(small_disk)
    filler_size = filler.stat().st_size
    os.truncate(filler, filler_size - 96 * 1024)  # room for a start, not for a build
    before = failures.free_bytes(d)
    with pytest.raises((apsw.FullError, OSError)) as e:
        rebuild([open_source(s) for s in cfg.sources], model, engine.chunker, d,
                keep_if_failed={"notes"})
    assert failures.disk_full(e.value)
    assert _leftovers(d) == [] and _open_build_files() == []
    assert failures.free_bytes(d) >= before, os.listdir(d)  # nothing of the build stays
    filler.unlink()
    final, _ = rebuild([open_source(s) for s in cfg.sources], model, engine.chunker, d)
    assert final is not None and _leftovers(d) == []
    engine.close()


def test_on_a_full_disk_a_sync_failure_is_said_in_words_and_passes_once_there_is_room(
        small_disk, tmp_path, monkeypatch):
    home = small_disk / "home"
    home.mkdir()
    monkeypatch.setenv("NOTEWELL_HOME", str(home))
    root = _notes(tmp_path / "notes", 10)
    cfg = markdown_config(root)
    with inproc_daemon(cfg) as d:
        filler = _fill(small_disk)
        _notes(root, 40)  # 30 new notes: the WAL grows with each
        with pytest.raises(background.SyncError):
            d.background.wait_for_sync()
        status = d.handlers.handle({"op": "status"})["result"]
        error = status["sources"][0]["last_error"]
        index_dir = d.background.engine.index_dir
        assert error and f"the disk holding {index_dir} {FULL} 0 MB" in error, error
        assert doctor.check_disk(status).status == "FAIL"
        alfred = json.loads(d.handlers.handle(
            {"op": "search", "query": "zq1x", "format": "alfred"})["result"]["alfred"])
        assert FULL in alfred["items"][0]["subtitle"]
        # Reads answer.
        assert d.handlers.handle({"op": "search", "query": "zq1x"})["result"]["hits"]
        filler.unlink()
        d.background.wait_for_sync()
        assert d.handlers.handle({"op": "status"})["result"]["sources"][0]["last_error"] is None
        assert d.handlers.handle({"op": "search", "query": "zq33x"})["result"]["hits"][0][
            "note_id"] == "notes:n033.md"


def test_on_a_full_disk_the_daemon_starts_says_why_and_agent_start_does_not_claim_it(
        small_disk, user_home, monkeypatch):
    home = small_disk / "home"
    (home / "logs").mkdir(parents=True)
    monkeypatch.setenv("NOTEWELL_HOME", str(home))
    monkeypatch.setenv("PYTHONPATH", str(REPO / "daemon"))
    notes = write_notes(small_disk.parent / "notes")
    config.save(config.Config(sources=(config.SourceConfig("notes", "markdown", str(notes)),)))
    monkeypatch.setattr(agent, "program", lambda python=None: notewell_command(
        "serve", "--poll", "0.5"))
    _fill(small_disk)
    try:
        with pytest.raises(agent.AgentError) as e:
            agent.start("linux")
        assert f"the disk holding {paths.index_dir()} {FULL} 0 MB" in str(e.value)
        assert running.holder() is not None  # it keeps running, answering why
    finally:
        running.stop()
        deadline = time.monotonic() + 10
        while running.holder() is not None and time.monotonic() < deadline:
            time.sleep(0.05)
