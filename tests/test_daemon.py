"""The daemon over a real Unix socket, in a subprocess: answers, permissions, bad frames."""

from __future__ import annotations

import json
import os
import plistlib
import socket
import stat
import subprocess
import sys

import msgpack
import pytest
from helpers import CLIENT, notewell_command, run_client, start_daemon, subprocess_env
from notewell.wire import paths, protocol


def raw_exchange(frame: bytes, read: bool = True) -> dict | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(15)
    s.connect(paths.socket_path())
    try:
        s.sendall(frame)
        if not read:
            return None
        try:
            body = protocol.read_frame(s, protocol.MAX_REPLY_BYTES)
        except protocol.ProtocolError:
            return None  # closed connection: also an acceptable answer to garbage
        return msgpack.unpackb(body, raw=False)
    finally:
        s.close()


def test_ping_status_search_over_the_socket(daemon):
    pong = daemon.ask("ping")["result"]
    assert pong["state"] == "ready" and pong["protocol"] == protocol.PROTOCOL_VERSION
    status = daemon.ask("status")["result"]
    for key in ("notes", "chunks", "model", "index_version", "sources", "last_sync"):
        assert key in status
    assert status["notes"] == 4 and status["sources"][0]["notes"] == 4
    hits = daemon.ask("search", query="banana bread", limit=3)["result"]["hits"]
    assert hits[0]["note_id"] == "notes:kitchen/banana-bread.md"


def test_socket_and_directory_are_private(daemon):
    sock = os.stat(paths.socket_path())
    assert stat.S_ISSOCK(sock.st_mode) and stat.S_IMODE(sock.st_mode) == 0o600
    assert stat.S_IMODE(os.stat(paths.runtime_dir()).st_mode) == 0o700


@pytest.mark.parametrize("frame", [
    (2**31).to_bytes(4, "big") + b"x",                      # length over the limit
    (10).to_bytes(4, "big") + b"abc",                       # truncated, then EOF
    protocol.frame(b"\xc1\xc1\xc1"),                        # not msgpack
    protocol.frame(msgpack.packb([1, 2, 3])),               # wrong shape
    protocol.frame(msgpack.packb({"op": 7})),               # wrong types
    protocol.frame(msgpack.packb({"op": "explode"})),       # unknown op
    protocol.frame(msgpack.packb({"op": "search", "query": 5})),
    protocol.frame(msgpack.packb({"op": "search", "query": "x", "limit": "ten"})),
    protocol.frame(msgpack.packb({"op": "ping", "v": 999})),  # version mismatch
    protocol.frame(msgpack.packb({"op": "search", "query": [[[[[[]]]]]]})),
    protocol.frame(msgpack.packb({"op": "ping", "x": b"\x00" * 1000})),
    b"\x00\x00",                                            # half a header
])
def test_malformed_frames_get_an_error_or_a_close_and_the_daemon_survives(daemon, frame):
    reply = raw_exchange(frame)
    if reply is not None:
        assert reply["ok"] is False and reply["error"]["code"]
    assert daemon.ask("ping")["ok"]
    assert daemon.ask("search", query="lisbon")["result"]["hits"]


def test_error_codes_are_specific(daemon):
    assert raw_exchange(protocol.frame(msgpack.packb({"op": "nope"})))["error"]["code"] == \
        "unknown_op"
    reply = raw_exchange(protocol.frame(msgpack.packb({"op": "ping", "v": 999})))
    assert reply["error"]["code"] == "version_mismatch"
    assert "restart" in reply["error"]["message"]


def test_several_requests_on_one_connection(daemon):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(paths.socket_path())
    for _ in range(3):
        s.sendall(protocol.frame(protocol.packb(protocol.request("ping"))))
        assert protocol.unpackb(protocol.read_frame(s, protocol.MAX_REPLY_BYTES))["ok"]
    s.close()


def test_client_prints_alfred_json_from_the_daemon(daemon):
    out = run_client(daemon.home, "banana", "bread")
    assert out.returncode == 0 and out.stderr == b""
    doc = json.loads(out.stdout)
    assert doc["skipknowledge"] is True
    assert doc["items"][0]["uid"] == "notes:kitchen/banana-bread.md"


def test_client_survives_invalid_utf8_and_control_characters(daemon):
    cmd = [sys.executable, "-IS", str(CLIENT),
           os.fsdecode(b"caf\xe9 \x01bread")]
    out = subprocess.run(cmd, capture_output=True, env=subprocess_env(daemon.home), timeout=10)
    assert out.returncode == 0
    assert json.loads(out.stdout)["items"]


def test_a_second_daemon_on_the_same_home_refuses_to_start(daemon):
    env = subprocess_env(daemon.home)
    out = subprocess.run(notewell_command("serve"), capture_output=True,
                         env=env, timeout=30)
    assert b"already serving" in out.stderr and str(daemon.proc.pid).encode() in out.stderr
    assert daemon.ask("ping")["ok"]
    # Its exit is one neither service manager restarts, as the agent's units say: under
    # launchd or systemd it would otherwise be started again every few seconds for as
    # long as the other daemon runs.
    assert out.returncode == 0
    from notewell.ops import login_agent as agent

    units = agent.examples()
    keep_alive = plistlib.loads(units[f"{agent.LABEL}.plist"])["KeepAlive"]
    assert keep_alive == {"SuccessfulExit": False}  # restarted only after a failed exit
    assert "Restart=on-failure" in units[agent.SERVICE].decode().splitlines()


def test_sigterm_stops_cleanly_and_removes_the_socket(home, notes_config):
    d = start_daemon(home)
    assert d.stop() == 0  # exited by itself: one that had to be killed returns -9
    assert not os.path.exists(paths.socket_path())


def _tgkill():
    import ctypes

    return getattr(ctypes.CDLL(None, use_errno=True), "tgkill", None)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or _tgkill() is None,
                    reason="needs Linux's /proc and tgkill")
def test_a_sigterm_that_reaches_another_thread_still_stops_the_daemon(home, notes_config):
    # The kernel may hand a process's signal to any of its threads; only that thread leaves
    # its system call. The accept loop waits without a timeout, so it must be woken.
    import signal

    d = start_daemon(home)
    pid = d.proc.pid
    others = [int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]
    assert others, "the daemon runs threads besides its main one"
    assert _tgkill()(pid, others[0], signal.SIGTERM) == 0
    try:
        assert d.proc.wait(timeout=30) == 0
    finally:
        d.stop()
    assert not os.path.exists(paths.socket_path())


def test_stale_socket_file_is_replaced(home, notes_config):
    paths.ensure_private_dir(paths.runtime_dir())
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(paths.socket_path())
    stale.close()  # the file stays behind, as after a crash
    d = start_daemon(home)
    try:
        assert d.ask("ping")["ok"]
    finally:
        d.stop()


def test_sync_op_picks_up_a_new_note(daemon, notes_dir):
    (notes_dir / "new.md").write_text("# Kayak\n\nPaddling the fjord at dawn.\n")
    reports = daemon.ask("sync_now")["result"]["reports"]
    assert reports[0]["added"] == 1
    assert daemon.ask("search", query="kayak fjord")["result"]["hits"][0]["title"] == "Kayak"


def test_sync_ops_by_their_names_and_the_old_ones_for_one_release(daemon):
    """``sync_now`` runs a round and waits, ``schedule_sync`` asks for one; ``index`` and
    ``sync`` (``wait``) are still taken; their arguments are checked as the reads' are."""
    assert daemon.ask("schedule_sync")["result"] == {"scheduled": True}
    assert daemon.ask("sync")["result"] == {"scheduled": True}
    for op, args in (("sync_now", {}), ("index", {}), ("sync", {"wait": True})):
        assert daemon.ask(op, **args)["result"]["reports"][0]["source"] == "notes"
    bad = daemon.ask("sync_now", rebuild="yes")["error"]
    assert bad == {"code": "bad_args", "message": "rebuild: must be true or false, got a "
                   "string"}
    assert daemon.ask("sync", wait=1)["error"]["code"] == "bad_args"
