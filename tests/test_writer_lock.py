"""The index's writer lock (``index.writer``): a second writer waits, saying for whom; the
lock dies with its holder; a waiting daemon can be stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest
from helpers import REPO
from notewell.index import writer

# Holds the lock as WHO, says "held", releases it when a line arrives on stdin, says
# "released", then waits for stdin to close.
HOLDER = """
import sys
from notewell.index import writer
with writer.hold(sys.argv[1], sys.argv[2]):
    print("held", flush=True)
    sys.stdin.readline()
print("released", flush=True)
sys.stdin.read()
"""


def start_holder(directory: str, who: str = "notewell index --rebuild") -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO / "daemon")}
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, directory, who], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def never(who: str) -> None:
    raise AssertionError(f"the lock is still held by {who}")


def test_a_second_writer_waits_for_the_first_and_is_told_who_holds_it(tmp_path):
    d = str(tmp_path / "index")
    proc = start_holder(d)
    events: list[str] = []
    told = threading.Event()

    def on_wait(who: str) -> None:
        events.append(f"waiting for {who}")
        told.set()

    def second() -> None:
        with writer.hold(d, "notewell sync", on_wait=on_wait):
            events.append("acquired")
            fd = os.open(writer.lock_path(d), os.O_RDONLY)
            try:
                assert writer.holder(fd) == f"notewell sync (pid {os.getpid()})"
            finally:
                os.close(fd)

    t = threading.Thread(target=second)
    t.start()
    try:
        assert told.wait(30)
        events.append("first releases")
        proc.stdin.write("go\n")
        proc.stdin.flush()
        t.join(30)
        assert not t.is_alive()
        assert events == [f"waiting for notewell index --rebuild (pid {proc.pid})",
                          "first releases", "acquired"]
    finally:
        proc.stdin.close()
        proc.wait(30)


def test_the_lock_dies_with_a_killed_holder(tmp_path):
    d = str(tmp_path / "index")
    proc = start_holder(d)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    with writer.hold(d, "notewell index", on_wait=never):
        pass


def test_a_waiter_that_may_be_stopped_stops_without_the_lock(tmp_path):
    d = str(tmp_path / "index")
    proc = start_holder(d, "notewell index")
    told: list[str] = []
    try:
        with pytest.raises(writer.Stopped), writer.hold(
                d, "the notewell daemon", on_wait=told.append, should_stop=lambda: bool(told)):
            raise AssertionError("got the lock another process holds")
        assert told == [f"notewell index (pid {proc.pid})"]
    finally:
        proc.stdin.write("go\n")
        proc.stdin.close()
        proc.wait(30)


def test_released_at_the_end_of_the_block_even_on_an_error(tmp_path):
    d = str(tmp_path / "index")
    with pytest.raises(RuntimeError), writer.hold(d, "notewell index"):
        raise RuntimeError("a failed write")
    # A second open file in this process conflicts as another process's would.
    with writer.hold(d, "notewell sync", on_wait=never):
        pass
