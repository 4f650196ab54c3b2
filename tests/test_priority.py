"""Background work at background priority: the sync thread and the watcher's loop are
lowered (Linux: the thread's nice, read back with getpriority on its thread id; macOS: the
thread's QoS class through a stand-in for libSystem), while the threads that answer
keystrokes (handler workers, and the model's own threads, made with the engine) keep
theirs."""

from __future__ import annotations

import errno
import os
import sys
import threading

import pytest
from notewell import priority
from notewell.config import Config
from notewell.engine import Engine
from notewell.model.fake import FakeEmbedder
from notewell.serve.daemon import Daemon

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="per-thread nice is Linux's")


def nice_of(tid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, tid)


@pytest.fixture
def base() -> int:
    value = nice_of(threading.get_native_id())
    if value >= priority.BACKGROUND_NICE:
        pytest.skip(f"the tests already run at nice {value}")
    return value


@linux_only
def test_linux_lowers_the_calling_thread_only(base: int):
    seen: dict[str, object] = {}
    lowered, release = threading.Event(), threading.Event()

    def body() -> None:
        seen["ok"] = priority.lower_this_thread("linux")
        seen["tid"] = threading.get_native_id()
        lowered.set()
        release.wait(30)

    thread = threading.Thread(target=body)
    thread.start()
    try:
        assert lowered.wait(30)
        assert seen["ok"] is True
        assert nice_of(seen["tid"]) == priority.BACKGROUND_NICE  # type: ignore[arg-type]
        assert nice_of(threading.get_native_id()) == base  # the caller's thread: untouched
    finally:
        release.set()
        thread.join()


class FakeLibSystem:
    def __init__(self, result: int = 0) -> None:
        self.result = result
        self.calls: list[tuple[int, int]] = []

    def pthread_set_qos_class_self_np(self, qos: int, relative: int) -> int:
        self.calls.append((qos, relative))
        return self.result


def test_darwin_sets_the_threads_qos_class_to_utility(base: int):
    lib = FakeLibSystem()
    assert priority.lower_this_thread("darwin", libsystem=lib) is True
    assert lib.calls == [(0x11, 0)]  # QOS_CLASS_UTILITY, <sys/qos.h>
    assert nice_of(threading.get_native_id()) == base  # no Linux call on darwin
    refused = FakeLibSystem(result=errno.EPERM)
    assert priority.lower_this_thread("darwin", libsystem=refused) is False  # logged, no raise


def test_other_systems_are_left_alone(base: int):
    assert priority.lower_this_thread("win32") is False
    assert nice_of(threading.get_native_id()) == base


@linux_only
def test_the_daemon_lowers_its_sync_and_watch_threads_not_the_keystroke_path(
        home, notes_config: Config, base: int):
    engine = Engine(notes_config, embedder=FakeEmbedder())
    model_thread: dict[str, int] = {}
    started, release = threading.Event(), threading.Event()

    def model_threads() -> None:
        model_thread["tid"] = threading.get_native_id()
        started.set()
        release.wait(60)

    def make_engine(_: Config) -> Engine:
        # Stands in for onnxruntime, whose worker threads are made with its session and
        # run every query's embedding as well as the sync's.
        threading.Thread(target=model_threads, daemon=True).start()
        assert started.wait(30)
        return engine

    d = Daemon(notes_config, engine_factory=make_engine, use_events=False)
    d.handlers.ops["nice"] = lambda req, view=None: nice_of(threading.get_native_id())
    d.background.start()
    try:
        d.background.wait_for_sync()  # the engine is up and a sync has run
        sync = d.background.thread
        assert sync is not None and sync.native_id is not None
        assert nice_of(sync.native_id) == priority.BACKGROUND_NICE
        watch = next(t for t in threading.enumerate() if t.name == "notewell-watch")
        assert watch.native_id is not None
        assert nice_of(watch.native_id) == priority.BACKGROUND_NICE
        assert nice_of(model_thread["tid"]) == base
        reply = d.handlers.answer({"op": "nice"})  # on a handler worker, as a keystroke
        assert reply == {"ok": True, "result": base}
    finally:
        release.set()
        d.request_stop()
        d.shutdown()



@linux_only
def test_the_watchers_loop_lowers_itself(tmp_path, monkeypatch, base: int):
    from notewell.config import SourceConfig
    from notewell.ingest import watch
    from notewell.sources import open_source

    called = threading.Event()

    def lower_and_tell() -> bool:
        result = priority.lower_this_thread()
        called.set()
        return result

    monkeypatch.setattr(watch, "lower_this_thread", lower_and_tell)
    source = open_source(SourceConfig("notes", "markdown", str(tmp_path)))
    watcher = watch.ChangeWatcher([source], use_events=False)
    watcher.start()  # from this, unlowered, thread: nothing to inherit
    try:
        assert called.wait(30)
        loop = next(t for t in threading.enumerate() if t.name == "notewell-watch")
        assert loop.native_id is not None
        assert nice_of(loop.native_id) == priority.BACKGROUND_NICE
        assert nice_of(threading.get_native_id()) == base
    finally:
        watcher.stop()


@linux_only
def test_the_copies_loader_threads_lower_themselves(engine, monkeypatch, base: int):
    # Nobody waits for them (SQLite answers meanwhile), so they are background work.
    from notewell.index import copies

    seen: list[tuple[str, int]] = []

    def lower_and_record() -> bool:
        result = priority.lower_this_thread()
        seen.append((threading.current_thread().name, nice_of(threading.get_native_id())))
        return result

    monkeypatch.setattr(copies, "lower_this_thread", lower_and_record)
    engine.sync()
    engine.index.warm_vectors(wait=True)
    assert seen == [("notewell-vectors", priority.BACKGROUND_NICE)]
    assert nice_of(threading.get_native_id()) == base


@linux_only
def test_the_models_threads_keep_the_priority_they_were_made_with(tmp_path):
    # onnxruntime's and the tokenizer's worker threads run queries too. A background
    # thread that embeds after lowering itself must not leave them at its priority; in a
    # process of its own, so that no earlier test has started them.
    import json
    import subprocess

    from helpers import REPO

    script = """
import json, os, threading
from notewell.model.embedding import OnnxEmbedder
from notewell.model.files import locate_model_files
from notewell.priority import lower_this_thread
embedder = OnnxEmbedder(locate_model_files())  # embeds nothing while it is made
def sync():
    lower_this_thread()
    embedder.embed_batch(["a passage the background sync embeds"] * 4)
thread = threading.Thread(target=sync)
thread.start()
thread.join()  # its OS thread may outlive join for a moment: left out
tasks = [int(t) for t in os.listdir(f"/proc/{os.getpid()}/task")]
print(json.dumps(sorted({os.getpriority(os.PRIO_PROCESS, t) for t in tasks
                         if t != thread.native_id})))
"""
    env = dict(os.environ, PYTHONPATH=str(REPO / "daemon"), NOTEWELL_HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    base = nice_of(threading.get_native_id())
    assert json.loads(out.stdout.splitlines()[-1]) == [base]
