"""The MCP server's link to the daemon: the daemon started once when it is down, bounded
waits, and what each tool is told; with an injected starter and clock, no real daemon
started by the link itself."""

from __future__ import annotations

import pytest
from helpers import start_daemon, wait_synced
from notewell.agents import tools
from notewell.agents.link import DaemonLink, Refused, Unavailable


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def link(home, start, wait: float = 5.0) -> tuple[DaemonLink, Clock]:
    clock = Clock()
    return DaemonLink(start=start, wait=wait, sleep=clock.sleep,
                      monotonic=clock.monotonic), clock


def test_a_start_that_never_comes_up_is_tried_once_then_fails_at_once(home):
    starts = []
    d, clock = link(home, lambda: starts.append(1) or "started by hand")
    with pytest.raises(Unavailable, match=r"not ready after 5 s of starting it; run "
                       "`notewell serve`"):
        d.ask("ping")
    assert starts == [1] and clock.now == pytest.approx(5.0, abs=0.2)
    before = clock.now
    with pytest.raises(Unavailable, match=r"it was started \(started by hand\) but did not "
                       "answer within 5 s"):
        d.ask("search", query="x")
    assert starts == [1] and clock.now == before  # no second start, no second wait


def test_a_start_that_fails_says_why(home):
    def refuse() -> str:
        raise RuntimeError("systemctl is not on PATH")

    d, clock = link(home, refuse)
    for _ in range(2):
        with pytest.raises(Unavailable, match=r"starting it failed .*systemctl is not on "
                           "PATH.*notewell serve"):
            d.ask("status")
    assert clock.now == 0.0


def test_never_starting_fails_at_once(home):
    d, clock = link(home, None)
    with pytest.raises(Unavailable, match="not running; run `notewell serve`"):
        d.ask("status")
    assert clock.now == 0.0


def test_a_started_daemon_answers_the_waiting_call(home, notes_config):
    """The starter brings a real daemon (fake embedder) up; the call that started it
    gets its answer."""
    running = []

    def start() -> str:
        running.append(start_daemon(home))
        return "started"

    d = DaemonLink(start=start, wait=30.0)
    try:
        assert d.ask("ping")["pong"] is True
        wait_synced(running[0])
        assert d.ask("search", query="banana")["hits"][0]["title"] == "Banana bread"
        with pytest.raises(Refused) as e:
            d.ask("note", note_id="notes:nope.md")
        assert e.value.code == "not_found"
    finally:
        for r in running:
            r.stop()
    assert len(running) == 1


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
