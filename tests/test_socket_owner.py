"""A socket another user could answer on is refused (issue 36.4): a deep home's socket
lives under /tmp (``/tmp/notewell-UID/HASH``), where anyone may make that folder first and
listen in it. The clients (Python and zsh) and the MCP relay send nothing to a socket whose
folders are not this user's alone, or whose daemon the kernel says is another user; the
daemon passes a taken name over for one it can own, and says so in its log.

The other user is uid 65534 (``nobody``): root makes the folders theirs with ``chown``, and
a forked child becomes them to listen. Skipped when not root."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path

import msgpack
import pytest
from helpers import SCRIPTS, FakeListener
from notewell.agents import relay
from notewell.serve import transport
from notewell.wire import client, paths, protocol

OTHER = 65534
needs_root = pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another user")
EVIL = '{"items":[{"title":"EVIL","arg":"https://attacker.example/"}]}'


@pytest.fixture
def short_tmp(monkeypatch):
    """A stand-in for /tmp (sticky, open to everyone), short enough for socket paths."""
    d = tempfile.mkdtemp(prefix="nws-", dir="/tmp")
    os.chmod(d, 0o1777)
    monkeypatch.setattr(paths, "SHORT_TMP", d)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def deep_home(tmp_path, monkeypatch) -> Path:
    h = tmp_path / ("d" * 80) / "notewell"
    h.mkdir(parents=True)
    monkeypatch.setenv("NOTEWELL_HOME", str(h))
    assert len(str(h / "run" / "notewell.sock")) > paths.MAX_SOCKET_PATH
    return h


def take(folder: str) -> None:
    """What the other user does first: make the folder and its parent theirs, open to all."""
    for path in (os.path.dirname(folder), folder):
        os.makedirs(path, exist_ok=True)
        os.chmod(path, 0o777)
        os.chown(path, OTHER, OTHER)


class Listener:
    """A stand-in for the other user's daemon: answers with EVIL, keeps what it was sent."""

    def __init__(self, path: str) -> None:
        self.received = b""
        self.listener = FakeListener(path, self._answer)
        os.chmod(path, 0o777)

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(2)
        with contextlib.suppress(OSError):
            self.received += conn.recv(65536)
            conn.sendall(protocol.frame(msgpack.packb({"ok": True, "result": {"alfred": EVIL}})))

    def close(self) -> None:
        self.listener.close()


@needs_root
def test_a_name_another_user_took_is_passed_over_and_the_log_says_so(short_tmp, deep_home,
                                                                     caplog):
    names = paths.fallback_dirs()
    take(names[0])
    trap = Listener(os.path.join(names[0], "notewell.sock"))
    try:
        assert paths.runtime_dir() == names[1]  # the clients look there too
        with caplog.at_level(logging.WARNING):
            server = transport.Server(lambda req, progress: {
                "ok": True, "result": {"alfred": '{"items":[]}'}}, threading.Event())
            server.open()
        try:
            assert server.socket_path == os.path.join(names[1], "notewell.sock")
            for folder in paths.socket_chain(server.socket_path):
                st = os.lstat(folder)
                assert st.st_uid == os.getuid() and st.st_mode & 0o777 == 0o700, folder
            taken = f"{os.path.dirname(names[0])} is not yours: it is owned by uid {OTHER}"
            assert taken in caplog.text
            assert names[1] in caplog.text
            threading.Thread(target=server.serve_forever, daemon=True).start()
            assert client.alfred_output("my private words") == '{"items":[]}'
        finally:
            server.stop_event.set()
            server.wake()
            server.close_socket()
            server.release_lock()
        assert trap.received == b""
    finally:
        trap.close()


@needs_root
def test_every_name_taken_means_a_folder_nobody_can_guess_found_through_the_record(
        short_tmp, deep_home):
    for folder in paths.fallback_dirs():
        take(folder)
    run_dir = transport.claim_runtime_dir()
    assert run_dir not in paths.fallback_dirs()
    assert os.path.dirname(run_dir).startswith(os.path.dirname(paths.fallback_dirs()[0]) + "-")
    assert os.stat(os.path.dirname(run_dir)).st_mode & 0o777 == 0o700
    paths.record_socket(os.path.join(run_dir, "notewell.sock"))
    assert paths.runtime_dir() == run_dir  # clients and `agent stop` find it


@needs_root
def test_the_clients_and_the_relay_refuse_a_folder_another_user_owns(short_tmp, deep_home):
    names = paths.fallback_dirs()
    for folder in names:  # every name taken, no daemon of ours: nowhere else to go
        take(folder)
    trap = Listener(os.path.join(names[0], "notewell.sock"))
    try:
        (item,) = json.loads(client.alfred_output("my private words"))["items"]
        assert item["title"] == (f"notewell: the socket folder {os.path.dirname(names[0])} "
                                 f"is not yours: it is owned by uid {OTHER}")
        assert "notewell agent restart" in item["subtitle"]
        with pytest.raises(relay.Down, match="is not yours: it is owned by uid 65534"):
            relay.connect(start=False, wait=0)
        assert trap.received == b""  # not a byte of the query
    finally:
        trap.close()


def test_a_folder_open_to_others_is_refused_in_words(short_tmp, deep_home):
    names = paths.fallback_dirs()
    os.makedirs(names[0], mode=0o700)
    os.chmod(os.path.dirname(names[0]), 0o700)
    os.chmod(names[0], 0o755)
    open(os.path.join(names[0], "notewell.sock"), "w").close()  # whoever made it
    (item,) = json.loads(client.alfred_output("q"))["items"]
    assert item["title"] == (f"notewell: the socket folder {names[0]} is open to other "
                             "users (mode 0755)")


def test_a_socket_folder_missing_still_means_not_running(short_tmp, deep_home):
    (item,) = json.loads(client.alfred_output("q"))["items"]
    assert item["title"] == "notewell is not running"


@needs_root
def test_a_daemon_the_kernel_says_is_another_user_is_refused(tmp_path, monkeypatch):
    """The folders are ours (root made them), but the process listening is not: the peer
    check (SO_PEERCRED) catches what the folder check cannot."""
    home = Path(tempfile.mkdtemp(prefix="nwp-", dir="/tmp"))
    try:
        monkeypatch.setenv("NOTEWELL_HOME", str(home))
        sock_path = paths.socket_path()
        paths.ensure_private_dir(os.path.dirname(sock_path))
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the other user: listen there, as them
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.bind(sock_path)
                os.setgid(OTHER)
                os.setuid(OTHER)
                s.listen(1)  # the kernel records the listener's credentials here
                os.write(ready_w, b"x")
                s.settimeout(10)
                conn, _ = s.accept()
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    got = conn.recv(65536)
                    conn.sendall(b"RECEIVED" if got else b"")
            finally:
                os._exit(0)
        os.read(ready_r, 1)
        try:
            (item,) = json.loads(client.alfred_output("my private words"))["items"]
            assert item["title"] == (f"notewell: the daemon on {sock_path} runs as uid "
                                     f"{OTHER}, not as you")
        finally:
            os.waitpid(pid, 0)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_the_peer_uid_comes_from_the_kernel():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        assert client.peer_uid(a) == os.getuid()


# -- the zsh client: no peer check, so its folder check is strict ------------------------------


@needs_root
@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
@pytest.mark.parametrize("taken", ["socket-folder", "folder-above", "open-folder"])
def test_the_zsh_client_hands_a_socket_it_cannot_trust_to_python(taken, marker):
    # A real /tmp name of the deep-home form (/tmp/notewell-*/HASH), unique to this test.
    root = f"/tmp/notewell-{os.getuid()}-test{uuid.uuid4().hex[:8]}"
    folder = f"{root}/0123456789ab"
    home = Path(tempfile.mkdtemp(prefix="nwz-", dir="/tmp"))
    try:
        os.makedirs(folder, mode=0o700)
        os.chmod(root, 0o700)
        trap = Listener(f"{folder}/notewell.sock")
        (home / "notewell-socket").write_text(f"{folder}/notewell.sock")
        env = {"NOTEWELL_HOME": str(home), "NOTEWELL_PYTHON": str(marker)}

        def run() -> bytes:
            return subprocess.run(["zsh", "-f", str(SCRIPTS / "notewell-query.zsh"), "q"],
                                  capture_output=True, env=env, timeout=10).stdout

        assert run() == EVIL.encode()  # all ours: the zsh client answers by itself
        trap.received = b""
        if taken == "socket-folder":
            os.chown(folder, OTHER, OTHER)
        elif taken == "folder-above":
            os.chown(root, OTHER, OTHER)
        else:
            os.chmod(folder, 0o755)
        assert run().startswith(b"FALLBACK -IS")
        assert trap.received == b""
        trap.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
