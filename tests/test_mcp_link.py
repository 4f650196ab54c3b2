"""Reaching the daemon for an agent: the relay starts the daemon once when it is down and
waits a bounded time (an injected starter and clock, no daemon started by the relay
itself), and the daemon's in-process link waits for a warming engine, within bounds, and
says what each refusal means."""

from __future__ import annotations

import pytest
from helpers import start_daemon, wait_synced
from notewell.agents import relay, tools
from notewell.agents.link import DaemonLink, Refused, Unavailable


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def connect(start: bool, starter, wait: float = 5.0) -> tuple[object, Clock]:
    clock = Clock()
    return relay.connect(start, wait, sleep=clock.sleep, monotonic=clock.monotonic,
                         starter=starter), clock


def test_a_start_that_never_comes_up_is_tried_once_then_fails(home):
    starts = []
    clock = Clock()
    with pytest.raises(relay.Down, match=r"did not answer within 5 s of starting it "
                       r"\(started by hand\); run `notewell serve`"):
        relay.connect(True, 5.0, sleep=clock.sleep, monotonic=clock.monotonic,
                      starter=lambda: starts.append(1) or "started by hand")
    assert starts == [1] and clock.now == pytest.approx(5.0, abs=0.1)


def test_a_start_that_fails_says_why(home):
    def refuse() -> str:
        raise RuntimeError("systemctl is not on PATH")

    clock = Clock()
    with pytest.raises(relay.Down, match=r"starting it failed .*systemctl is not on "
                       "PATH.*notewell serve"):
        relay.connect(True, 5.0, sleep=clock.sleep, monotonic=clock.monotonic,
                      starter=refuse)
    assert clock.now == 0.0


def test_never_starting_fails_at_once(home):
    clock = Clock()
    with pytest.raises(relay.Down, match="not running; run `notewell serve`"):
        relay.connect(False, 5.0, sleep=clock.sleep, monotonic=clock.monotonic,
                      starter=lambda: pytest.fail("must not start"))
    assert clock.now == 0.0


def test_a_started_daemon_is_switched_to_mcp(home, notes_config):
    """The starter brings a real daemon (fake embedder) up; the relay's connection is
    switched to MCP and carries JSON-RPC."""
    running = []

    def start() -> str:
        running.append(start_daemon(home))
        return "started"

    try:
        sock = relay.connect(True, 30.0, starter=start)
        try:
            sock.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n')
            assert b'"id":1' in sock.recv(4096).replace(b" ", b"")
        finally:
            sock.close()
    finally:
        for r in running:
            r.stop()
    assert len(running) == 1


# -- the daemon's in-process link -------------------------------------------------------------


def test_a_warming_daemon_is_waited_for_within_bounds():
    clock = Clock()
    replies = [{"ok": False, "error": {"code": "warming_up", "message": "loading"}}] * 3
    replies.append({"ok": True, "result": {"pong": True}})
    link = DaemonLink(lambda req: replies.pop(0), wait=5.0, sleep=clock.sleep,
                      monotonic=clock.monotonic)
    assert link.ask("ping") == {"pong": True} and clock.now == pytest.approx(0.3)

    never = DaemonLink(lambda req: {"ok": False, "error": {"code": "warming_up"}},
                       wait=5.0, sleep=clock.sleep, monotonic=clock.monotonic)
    with pytest.raises(Unavailable, match="not ready after 5 s"):
        never.ask("search", query="x")


def test_refusals_keep_their_code_and_a_stopping_daemon_is_unavailable():
    asked = []
    link = DaemonLink(lambda req: asked.append(req) or {
        "ok": False, "error": {"code": "not_found", "message": "no note with id 'x'"}})
    with pytest.raises(Refused) as e:
        link.ask("note", note_id="x")
    assert e.value.code == "not_found" and asked[0]["op"] == "note"
    with pytest.raises(Unavailable, match="stopping"):
        DaemonLink(lambda req: None).ask("status")


def test_the_link_asks_the_daemons_handlers(home, notes_config):
    d = start_daemon(home)
    try:
        wait_synced(d)
        link = DaemonLink(lambda req: d.ask(req.pop("op"), **{
            k: v for k, v in req.items() if k != "v"}))
        assert link.ask("search", query="banana")["hits"][0]["title"] == "Banana bread"
    finally:
        d.stop()


# -- argument checks, without a session ------------------------------------------------------


def test_defaults_are_filled_in_from_the_schema():
    args = tools.check(tools.TOOLS["search_notes"], {"query": "x"})
    assert args == {"query": "x", "limit": 8, "tags": [], "source": None,
                    "modified_after": None, "modified_before": None}
    assert tools.check(tools.TOOLS["get_note"], {"note_id": "a", "max_chars": 10.0})[
        "max_chars"] == 10
    assert tools.check(tools.TOOLS["index_status"], None) == {}


def test_every_tool_has_a_request_and_an_answer_shape():
    for name, spec in tools.TOOLS.items():
        required = {k: "x" for k in spec.input_schema["required"]}
        if name == "similar_notes":  # a note_id, or text instead
            required = {"note_id": "x"}
            assert tools.request(name, tools.check(spec, {"text": "x"}))[0] == "related"
        args = tools.check(spec, required)
        op, _ = tools.request(name, args)
        assert op in ("search", "note", "similar", "recent", "tags", "status")


def test_snippets_are_cut_to_240_characters():
    hit = {"note_id": "n:a", "title": "A", "source": "n", "url": "u", "path": None,
           "tags": [], "heading_path": "", "snippet": "word " * 200, "score": 0.5,
           "modified": 1_700_000_000.0, "archived": False}
    out = tools.structured("search_notes", {"hits": [hit], "notices": []}, {"query": "q"})
    assert len(out["hits"][0]["snippet"]) == 240 and out["hits"][0]["snippet"].endswith("…")
    assert out["hits"][0]["modified"].startswith("2023-11-1")
