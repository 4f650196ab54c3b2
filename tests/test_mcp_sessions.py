"""MCP sessions in the daemon: the SDK loaded only when an agent needs it, any number of
sessions at once, and a session that misbehaves closed without the others noticing.
Against a real daemon (fake embedder) through ``notewell mcp``, and in-process on socket
pairs for the limits."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading

import anyio
import pytest
from helpers import REPO, server_params, start_daemon, subprocess_env, wait_synced
from mcp import ClientSession
from mcp.client.stdio import stdio_client
from notewell.agents import session as mcp_session
from notewell.wire import paths

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "t", "version": "0"}}}


def status(d) -> dict:
    return d.ask("status")["result"]


def wait_for(predicate, what: str, d) -> None:
    """Poll the daemon's status until ``predicate`` holds (a condition on another
    process: there is nothing to wait on but its answers)."""
    import time

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        s = status(d)
        if predicate(s):
            return
        time.sleep(0.02)
    pytest.fail(f"{what}: {status(d).get('mcp_sessions')}")


def relay(home) -> subprocess.Popen:
    env = subprocess_env(home)
    env["PYTHONPATH"] = str(REPO / "daemon")
    return subprocess.Popen([sys.executable, "-m", "notewell", "mcp", "--no-start"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)


def test_sessions_at_once_and_garbage_closes_only_its_own(home, notes_config):
    d = start_daemon(home)
    try:
        wait_synced(d)
        assert status(d)["mcp_sessions"] is None  # no agent yet: the SDK is not loaded
        garbage: dict = {}

        def send_garbage() -> None:
            p = relay(home)
            out, err = p.communicate(b"this is not json\n" + json.dumps(INIT).encode()
                                     + b"\n", timeout=30)
            garbage.update(out=out, err=err, rc=p.returncode)

        results: list = []
        errors: list = []

        def run_one(n: int) -> None:
            async def go() -> None:
                async with stdio_client(server_params(home)) as (read, write), \
                        ClientSession(read, write) as s:
                    await s.initialize()
                    results.append(await s.call_tool("search_notes", {"query": "banana"}))
                    await anyio.to_thread.run_sync(both_open.wait)
                    if n == 0:
                        counts.append(status(d)["mcp_sessions"])
                        await anyio.to_thread.run_sync(send_garbage)
                    for _ in range(5):
                        results.append(await s.call_tool("search_notes",
                                                         {"query": "vacuum"}))
            try:
                anyio.run(go)
            except Exception as e:
                errors.append(e)

        both_open = threading.Barrier(2)
        counts: list = []
        threads = [threading.Thread(target=run_one, args=(n,)) for n in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        assert counts == [2]
        assert len(results) == 12 and not any(r.is_error for r in results)
        assert {r.structured_content["hits"][0]["title"] for r in results} == {
            "Banana bread", "Postgres vacuum"}
        # The garbage session got one parse error, nothing else, and was closed.
        lines = garbage["out"].decode().splitlines()
        assert len(lines) == 1, lines
        error = json.loads(lines[0])["error"]
        assert error["code"] == -32700 and "not a JSON-RPC message" in error["message"]
        assert garbage["rc"] == 0
        wait_for(lambda s: s["mcp_sessions"] == 0, "every session closed", d)
        assert d.ask("search", query="banana")["ok"]  # the keystroke path never noticed
    finally:
        d.stop()


def test_an_installed_client_has_the_sdk_loaded_at_start(home, notes_config):
    paths.write_atomic(paths.mcp_marker(), b"claude-code")
    d = start_daemon(home)
    try:
        wait_for(lambda s: s["mcp_sessions"] == 0, "the SDK loaded at start", d)
    finally:
        d.stop()


# -- limits, in-process on socket pairs -----------------------------------------------------


def answers(req: dict) -> dict:
    return {"ok": True, "result": {"state": "ready", "notes": 1, "chunks": 1,
                                   "version": "x", "sources": []}}


def serve_pair(sessions: mcp_session.Sessions) -> tuple[socket.socket, threading.Thread]:
    ours, theirs = socket.socketpair()
    assert sessions.reserve()
    t = threading.Thread(target=sessions.serve, args=(theirs,), daemon=True)
    t.start()
    return ours, t


def read_lines(sock: socket.socket) -> list[dict]:
    data = b""
    while chunk := sock.recv(1 << 16):
        data += chunk
    return [json.loads(x) for x in data.splitlines() if x.strip()]


def test_a_message_over_the_limit_closes_its_session_only(monkeypatch):
    monkeypatch.setattr(mcp_session, "MAX_MESSAGE_BYTES", 1000)
    sessions = mcp_session.Sessions(answers)
    bad, bad_thread = serve_pair(sessions)
    good, good_thread = serve_pair(sessions)
    bad.sendall(b"{" + b" " * 5000)
    bad_thread.join(10)
    assert not bad_thread.is_alive()
    (error,) = read_lines(bad)
    assert "over the limit of 1000 bytes" in error["error"]["message"]
    good.sendall(json.dumps(INIT).encode() + b"\n")
    good.shutdown(socket.SHUT_WR)
    (reply,) = read_lines(good)
    assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "notewell"
    good_thread.join(10)
    assert sessions.count() == 0


def test_a_client_that_never_reads_is_dropped(monkeypatch):
    monkeypatch.setattr(mcp_session, "SEND_TIMEOUT", 0.2)
    sessions = mcp_session.Sessions(answers)
    deaf, thread = serve_pair(sessions)
    deaf.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    deaf.sendall(json.dumps(INIT).encode() + b"\n")
    listing = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).encode() + b"\n"
    deaf.settimeout(10)
    with pytest.raises(OSError):  # the daemon stops reading, then closes it
        for _ in range(10_000):
            deaf.sendall(listing)
    thread.join(10)
    assert not thread.is_alive() and sessions.count() == 0
    deaf.close()


def test_sessions_are_capped_and_close_all_ends_them(monkeypatch):
    monkeypatch.setattr(mcp_session, "MAX_SESSIONS", 1)
    sessions = mcp_session.Sessions(answers)
    ours, thread = serve_pair(sessions)
    assert not sessions.reserve()  # the one slot is taken
    sessions.close_all()
    thread.join(10)
    assert not thread.is_alive() and read_lines(ours) == []
    assert sessions.reserve()


def test_agents_tool_calls_run_one_at_a_time_below_the_keystroke_path():
    """Two sessions call a tool together: the daemon's handlers see one call at a time,
    on a thread of lower priority than the keystroke path's (Linux: nice per thread)."""
    import os

    inside, most, gate = [0], [0], threading.Lock()
    nice: list[int] = []
    both_asked = threading.Barrier(2, timeout=5)

    def slow(req: dict) -> dict:
        with gate:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        nice.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        with contextlib.suppress(threading.BrokenBarrierError):
            both_asked.wait()  # holds the first call until the second is asked, or times out
        with gate:
            inside[0] -= 1
        return answers(req)

    sessions = mcp_session.Sessions(slow)
    pairs = [serve_pair(sessions) for _ in range(2)]
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "index_status", "arguments": {}}}
    for sock, _ in pairs:
        sock.sendall(json.dumps(INIT).encode() + b"\n" + json.dumps(call).encode() + b"\n")
        sock.shutdown(socket.SHUT_WR)
    for _, thread in pairs:
        thread.join(20)
    assert most == [1] and len(nice) == 2
    if sys.platform.startswith("linux"):
        assert min(nice) > os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
