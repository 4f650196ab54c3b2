"""One writer for the index (issue 27, part 3). With a daemon running (or still loading),
`notewell index [--rebuild]` and `notewell sync` have its sync thread do the work and
stream its progress back; without one, a command holds the index's writer lock, which
the daemon also takes before it writes. Raced on purpose: one build published, no note
lost, no text embedded twice, no "database is locked"."""

from __future__ import annotations

import collections
import os
import subprocess
import threading
from pathlib import Path

import pytest
from helpers import notewell_command, start_daemon, subprocess_env, wait_synced, write_notes
from notewell.config import Config, SourceConfig
from notewell.engine import Engine
from notewell.index import store, writer
from notewell.model.fake import FakeEmbedder
from notewell.serve.background import Background
from notewell.serve.handlers import Handlers
from notewell.serve.transport import Server
from notewell.wire import client, paths, protocol

DELAY = 0.02  # seconds per text embedded: long enough for the writers to overlap


def cli(home: Path, *args: str, record: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen(notewell_command(*args, delay=DELAY, record=record),
                            env=subprocess_env(home), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def first_line(proc: subprocess.Popen, timeout: float = 60) -> str:
    """The command's first line on stderr; fails (and ends the command) rather than hang
    when none comes."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(proc.stderr.readline()),
                              daemon=True)
    reader.start()
    reader.join(timeout)
    if not lines:
        proc.kill()
        pytest.fail(f"no line on stderr within {timeout} s")
    return lines[0]


def generation() -> int:
    return store.generations(paths.index_dir())[-1][0]


def new_notes(folder: Path, n: int) -> list[str]:
    """``n`` notes, each with a word no other note has; the words."""
    words = [f"zorblax{i:03d}" for i in range(n)]
    write_notes(folder, {f"new/{w}.md": f"# Note {w}\n\nAbout {w} and nothing else.\n"
                         for w in words})
    return words


def embedded_twice(record: Path) -> list[str]:
    counts = collections.Counter(record.read_text().split())
    return [h for h, n in counts.items() if n > 1]


# -- the race, on a real daemon and without one --------------------------------------------


def test_rebuild_sync_and_the_daemons_own_sync_together(home, notes_config, notes_dir,
                                                        tmp_path):
    record = tmp_path / "embedded.txt"
    d = start_daemon(home, delay=DELAY, record=record)
    try:
        wait_synced(d)
        before = generation()
        words = new_notes(notes_dir, 40)  # the daemon's watcher syncs these on its own
        rebuild = cli(home, "index", "--rebuild", record=record)
        sync = cli(home, "sync", record=record)
        results = [finish(rebuild), finish(sync)]
        for code, out, err in results:
            assert code == 0, err
            assert "locked" not in out + err and "Traceback" not in err
        d.ask("sync_now")  # whatever the watcher still had
        status = d.ask("status")["result"]
        assert generation() == before + 1  # one build published
        assert status["index_path"] == store.current_path(paths.index_dir())
        assert status["notes"] == 4 + len(words)  # no note lost
        for w in words:
            hits = d.ask("search", query=w, mode="bm25", limit=1)["result"]["hits"]
            assert hits and hits[0]["title"] == f"Note {w}", w
        assert embedded_twice(record) == []
        assert not [n for n in os.listdir(paths.index_dir()) if n.startswith("building-")]
    finally:
        d.stop()


def test_two_commands_without_a_daemon_take_turns(home, notes_config, notes_dir, tmp_path):
    record = tmp_path / "embedded.txt"
    assert finish(cli(home, "index", "--quiet", record=record))[0] == 0
    before = generation()
    words = new_notes(notes_dir, 40)
    rebuild = cli(home, "index", "--rebuild", record=record)
    sync = cli(home, "sync", record=record)
    for code, out, err in (finish(rebuild), finish(sync)):
        assert code == 0, err
        assert "locked" not in out + err and "Traceback" not in err
    assert generation() == before + 1
    engine = Engine(notes_config, embedder=FakeEmbedder())
    try:
        with engine.reading() as view:
            assert view.status()["notes"] == 4 + len(words)
    finally:
        engine.close()
    assert embedded_twice(record) == []


# -- waiting for the lock ----------------------------------------------------------------


def test_a_command_waits_for_another_writer_and_says_so(home, notes_config):
    with writer.hold(paths.index_dir(), "notewell index --rebuild"):
        sync = cli(home, "sync")
        line = first_line(sync)
        assert line.startswith(f"notewell: waiting for notewell index --rebuild (pid "
                               f"{os.getpid()}) to finish writing the index"), line
        assert sync.poll() is None
    code, out, err = finish(sync)
    assert code == 0 and "4 added" in out, err


def test_a_daemon_started_while_a_command_writes_serves_and_writes_after_it(
        home, notes_config, notes_dir):
    assert finish(cli(home, "index", "--quiet"))[0] == 0
    [word] = new_notes(notes_dir, 1)
    d = None
    try:
        with writer.hold(paths.index_dir(), "notewell index --rebuild"):
            d = start_daemon(home)  # ready: it reads while it waits to write
            assert d.ask("search", query="banana bread")["result"]["hits"]
            sync = cli(home, "sync")  # the daemon's round waits: so does the command
            line = first_line(sync)
            assert f"waiting for notewell index --rebuild (pid {os.getpid()})" in line, line
        code, out, err = finish(sync)
        assert code == 0 and "locked" not in out + err, err
        hits = d.ask("search", query=word, mode="bm25")["result"]["hits"]
        assert hits and hits[0]["title"] == f"Note {word}"
    finally:
        if d is not None:
            d.stop()


# -- the daemon does the work, even while loading ------------------------------------------


class Observed(Background):
    """Says when a waiter has asked for its round."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.asked = threading.Event()

    def request_sync(self) -> None:
        super().request_sync()
        self.asked.set()


def test_a_rebuild_asked_while_the_daemon_loads_is_its_first_round(home, notes_dir):
    from notewell import config

    config.save(Config(sources=(SourceConfig("notes", "markdown", str(notes_dir),
                                             ("private/**",)),)))
    cfg = config.load()  # the daemon's config is the one on disk
    engine = Engine(cfg, embedder=FakeEmbedder())
    engine.sync()  # an index to rebuild
    before = engine.index.path
    loaded = threading.Event()

    def load() -> Engine:
        assert loaded.wait(30)
        return engine

    stop = threading.Event()
    bg = Observed(load, stop, use_events=False)
    handlers = Handlers(cfg, bg, stop.set)
    frames: list[dict] = []
    replies: list[dict] = []
    bg.start()
    try:
        assert bg.state in ("starting", "warming")
        asking = threading.Thread(target=lambda: replies.append(handlers.handle(
            {"op": "sync_now", "rebuild": True, "progress": True}, frames.append)))
        asking.start()
        assert bg.asked.wait(30) and bg.state == "warming"  # asked while loading
        loaded.set()
        asking.join(60)
        [reply] = replies
        assert reply["ok"], reply
        assert [r["added"] for r in reply["result"]["reports"]] == [4]  # a fresh index
        assert engine.index.path != before
        # Nobody held the replaced generation: it is closed and gone (search/generation).
        assert [p for _, p in store.generations(paths.index_dir())] == [engine.index.path]
        assert frames[-1] == {"progress": {"label": "indexing notes", "done": 4, "total": 4}}
    finally:
        stop.set()
        bg.wake()
        bg.thread.join(30)
        engine.close()


def test_a_daemon_that_could_not_open_its_index_leaves_the_work_to_the_command(home):
    stop = threading.Event()

    def broken() -> Engine:
        raise RuntimeError("no model")

    bg = Background(broken, stop, use_events=False)
    bg.start()
    bg.thread.join(30)
    reply = Handlers(Config(), bg, stop.set).handle({"op": "sync_now"})
    assert reply["error"]["code"] == "unavailable" and "no model" in reply["error"]["message"]


def test_a_changed_config_asks_for_a_restart_rather_than_indexing_the_old_one(home, notes_dir):
    from notewell import config

    config.save(Config(sources=(SourceConfig("notes", "markdown", str(notes_dir)),)))
    started_with = config.load()
    config.save(Config(sources=(SourceConfig("other", "markdown", str(notes_dir)),)))
    stop = threading.Event()
    bg = Background(lambda: Engine(config.load(), embedder=FakeEmbedder()), stop)
    stale = Handlers(started_with, bg, stop.set).handle({"op": "sync_now"})
    assert stale["error"]["code"] == "config_changed" and "restart" in stale["error"]["message"]


# -- progress frames on the wire -----------------------------------------------------------


def test_progress_frames_reach_the_client_before_the_reply(home):
    def answer(req, send):
        for done in (1, 2):
            send({"progress": {"label": "indexing notes", "done": done, "total": 2}})
        return {"ok": True, "result": {"asked": req["op"]}}

    stop = threading.Event()
    server = Server(answer, stop)
    server.open()
    serving = threading.Thread(target=server.serve_forever)
    serving.start()
    try:
        events: list[dict] = []
        reply = client.ask(protocol.request("sync_now"), on_progress=events.append)
        assert reply == {"ok": True, "result": {"asked": "sync_now"}}
        assert [e["done"] for e in events] == [1, 2]
    finally:
        stop.set()
        server.wake()
        serving.join(30)
        server.close_socket()
        server.release_lock()


@pytest.mark.parametrize("quiet", [False, True])
def test_the_command_shows_the_daemons_progress(daemon, quiet):
    args = ["index", "--rebuild"] + (["--quiet"] if quiet else [])
    code, out, err = finish(cli(daemon.home, *args))
    assert code == 0 and "notes: 4 added" in out, err
    assert ("indexing notes [" in err) is not quiet
    # The daemon built it: it serves the new generation as the command returns.
    assert daemon.ask("status")["result"]["index_path"] == store.current_path(
        paths.index_dir())


def test_setup_takes_turns_with_another_writer(home, notes_config, user_home):
    with writer.hold(paths.index_dir(), "notewell index --rebuild"):
        setup = subprocess.Popen(
            notewell_command("setup", "--yes", "--no-agent", "--no-workflow"),
            env=subprocess_env(home, HOME=str(user_home)), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        line = first_line(setup)
        assert f"waiting for notewell index --rebuild (pid {os.getpid()})" in line, line
    code, out, err = finish(setup)
    assert code == 0 and "notes: 4 added" in out, out + err


def test_stop_and_restart_send_their_reply_before_they_stop(home):
    """No delay is guessed for the reply to get out: it is sent, then the stop asked, and
    the connection closes (``handle`` returns None); a caller in this process without a
    connection gets the reply back after the stop was asked."""
    events: list[object] = []
    stop = threading.Event()
    bg = Background(lambda: Engine(Config(), embedder=FakeEmbedder()), stop)
    handlers = Handlers(Config(), bg, lambda: events.append("stop"),
                        request_restart=lambda: events.append("restart"))
    try:
        assert handlers.handle({"op": "stop"}, events.append) is None
        assert events == [{"ok": True, "result": {"stopping": True}}, "stop"]
        events.clear()
        assert handlers.handle({"op": "restart"}, events.append) is None
        assert events == [{"ok": True, "result": {"restarting": True}}, "restart"]
        events.clear()
        assert handlers.handle({"op": "stop"}) == {"ok": True, "result": {"stopping": True}}
        assert events == ["stop"]
    finally:
        handlers.shutdown()
