"""Every front end answers a read op the same way (``notewell.api``): for each read op and
a set of argument cases (good, a bad type, out of range, an unknown note, ``strict``
similar on a bad id, filters that match nothing), a real daemon over its socket (fake
embedder), the MCP link and tools it hosts, and the CLI without a daemon give the same
keys, hits and errors."""

from __future__ import annotations

import argparse
from pathlib import Path

import anyio
import pytest
from helpers import write_notes
from notewell import api, config
from notewell.agents import tools
from notewell.agents.link import DaemonLink, Refused
from notewell.agents.server import NotewellTools
from notewell.cli import reads
from notewell.model.fake import FakeEmbedder
from notewell.wire import requests
from reliability_helpers import ask, inproc_daemon

BREAD = "notes:kitchen/banana-bread.md"
LISBON = "notes:travel/lisbon.md"
CASES: list[tuple[str, dict]] = [
    ("search", {"query": "banana bread", "limit": 3}),
    ("search", {"query": "postgres vacuum", "mode": "bm25"}),
    ("search", {"query": "weekend trams", "mode": "dense", "limit": 2}),
    ("search", {"query": "#rec"}),  # a tag being typed: the tags
    ("search", {"query": "bread #recipes in:notes"}),
    ("search", {"query": ""}),
    ("search", {"query": "bread", "limit": "ten"}),  # bad type
    ("search", {"query": "bread", "limit": 80}),  # out of range
    ("search", {"query": "bread", "mode": "fuzzy"}),
    ("search", {"query": "bread", "tags": ["nosuchtag"]}),  # filters matching nothing
    ("search", {"query": "bread", "source": "elsewhere"}),
    ("search", {"query": "bread", "modified_before": "2001-01-01"}),
    ("search", {"query": "bread", "modified_after": "7d"}),
    ("search", {"query": "bread", "modified_after": "someday"}),  # bad date
    ("search", {"query": "bread after:someday"}),  # a bad typed date: a notice
    ("search", {"query": "bread", "modified_after": "2001", "modified_before": "2000"}),
    ("search", {"query": "bread", "surprise": 1}),  # an unknown key: ignored by the daemon
    ("similar", {"note_id": BREAD, "limit": 2}),
    ("similar", {"note_id": BREAD, "strict": True}),
    ("similar", {"note_id": "notes:nope.md"}),  # unknown: no hits
    ("similar", {"note_id": "notes:nope.md", "strict": True}),  # unknown, strict: an error
    ("similar", {"note_id": ""}),
    ("similar", {"note_id": BREAD, "limit": 0}),
    ("note", {"note_id": LISBON}),
    ("note", {"note_id": LISBON, "offset": 5, "max_chars": 10}),
    ("note", {"note_id": "notes:git/undo-commit.md", "heading": "Remote branches"}),
    ("note", {"note_id": LISBON, "heading": "Nope"}),
    ("note", {"note_id": "notes:nope.md"}),
    ("note", {"note_id": LISBON, "offset": 1_000_000}),
    ("note", {"note_id": LISBON, "max_chars": 0}),
    ("note", {"note_id": 7}),
    ("tags", {}),
    ("tags", {"prefix": "db"}),
    ("tags", {"prefix": "zz"}),
    ("tags", {"prefix": 5}),
    ("recent", {"limit": 2}),
    ("recent", {"tags": ["travel"]}),
    ("recent", {"source": "elsewhere"}),
    ("recent", {"tags": ["nosuchtag"], "limit": 3}),
    ("recent", {"limit": 0}),
    ("status", {}),
    ("related", {"text": "three ripe bananas baked for an hour", "limit": 3}),
    ("related", {"text": "tram rides at sunset", "source": "notes"}),
    ("related", {"text": "bread", "tags": ["nosuchtag"]}),  # filters matching nothing
    ("related", {"text": "   "}),  # blank
    ("related", {"text": "bin\x00ary\x00\x00data\x00"}),  # binary
    ("related", {}),  # neither text nor path
    ("related", {"path": "/nonexistent/notes.md"}),
    ("related", {"text": "bread", "limit": 80}),  # out of range
]
TOOL_OF = {spec.op: spec for spec in tools.TOOLS.values()}
# What only a running daemon knows, in its status (``serve.handlers``); the CLI's own
# ``notewell status`` adds "state": "not running".
DAEMON_STATUS = {"state", "problem", "pid", "uptime", "socket", "last_reports",
                 "mcp_sessions", "rebuilding", "watching", "behind", "disk_full"}
# Status values that differ by nature: a daemon's in-memory copies (a one-shot engine
# keeps none), and the file's size (the daemon's close checkpoints its WAL).
# A daemon holds the in-memory copies; a one-shot command never builds them.
DIFFERENT_BY_NATURE = {"in_memory", "index_bytes", "copies"}


def _id(case: tuple[str, dict]) -> str:
    return f"{case[0]}-{CASES.index(case)}"


def _timeless(answer: dict) -> dict:
    result = answer.get("result")
    if isinstance(result, dict) and "uptime" in result:
        return {"result": {k: v for k, v in result.items() if k != "uptime"}}
    return answer


def outcome(reply: dict) -> dict:
    """A daemon reply as ``{"result": ...}`` or ``{"error": (code, message)}``."""
    if reply["ok"]:
        return {"result": reply["result"]}
    return {"error": (reply["error"]["code"], reply["error"]["message"])}


def mcp_call(link: DaemonLink, op: str, args: dict) -> tuple[str, dict] | None:
    """The MCP tool's answer for a case it can be asked (its arguments, plus those it
    always sends): (text, structured) or ("error", message)."""
    spec = TOOL_OF.get(op)
    if spec is None:
        return None
    props = spec.input_schema["properties"]
    given = {k: v for k, v in args.items() if k in props}
    if {**given, **dict(spec.fixed)} != args:
        return None
    result = anyio.run(NotewellTools(link).call, spec.name, given)
    text = result.content[0].text
    return ("error", text) if result.is_error else ("ok", result.structured_content)


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("op-table")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NOTEWELL_HOME", str(root / "home"))
        (root / "home").mkdir()
        notes = write_notes(root / "notes")
        cfg = config.Config(sources=(config.SourceConfig(
            "notes", "markdown", str(notes), ("private/**",)),))
        config.save(cfg)
        cfg = config.load()
        out: dict = {case_id: {} for case_id in map(_id, CASES)}
        with inproc_daemon(cfg) as d:
            link = DaemonLink(d.handlers.answer, wait=0)
            for case in CASES:
                op, args = case
                got = out[_id(case)]
                got["daemon"] = outcome(ask(op, **args))
                try:
                    got["link"] = {"result": link.ask(op, **args)}
                except Refused as e:
                    got["link"] = {"error": (e.code, str(e))}
                got["mcp"] = mcp_call(link, op, args)
        # The daemon has stopped: the CLI answers in this process, from the same index.
        cli_args = argparse.Namespace(embedder=FakeEmbedder)
        for case in CASES:
            op, args = case
            try:
                out[_id(case)]["cli"] = {"result": reads.local_answer(cli_args, op, args)}
            except api.OpError as e:
                out[_id(case)]["cli"] = {"error": (e.code, str(e))}
        yield out


def test_the_table_has_one_answer_per_read_op():
    assert set(api.OPS_TABLE) == set(requests.OPS)
    assert {op for op, _ in CASES} == set(requests.OPS)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_daemon_link_mcp_and_cli_answer_alike(answers, case):
    op, args = case
    got = answers[_id(case)]
    daemon, link, cli = got["daemon"], got["link"], got["cli"]
    # The MCP link asks the daemon's own handlers (a status asked twice is a moment older).
    assert _timeless(link) == _timeless(daemon)
    if "error" in daemon:
        assert cli == daemon
    elif op == "status":
        mine, theirs = daemon["result"], cli["result"]
        assert set(mine) - set(theirs) == DAEMON_STATUS
        assert set(theirs) <= set(mine)
        assert {k: v for k, v in mine.items() if k in theirs and k not in
                DIFFERENT_BY_NATURE} == {k: v for k, v in theirs.items()
                                          if k not in DIFFERENT_BY_NATURE}
    else:
        assert cli == daemon
    if got["mcp"] is not None:
        kind, body = got["mcp"]
        spec = TOOL_OF[op]
        if "error" in daemon:
            assert kind == "error" and body == f"{spec.name}: {daemon['error'][1]}"
        else:
            try:
                given = tools.check(spec, {k: v for k, v in args.items()
                                           if k in spec.input_schema["properties"]})
            except requests.BadArguments as e:
                # By design an agent must say what it searches for (``agent_required``).
                assert (op, e.name) == ("search", "query")
                assert (kind, body) == ("error", f"{spec.name}: {e}")
                return
            assert kind == "ok"
            assert body == tools.structured(spec.name, daemon["result"], given)


def test_the_cases_cover_what_the_issue_names(answers):
    """Good answers, bad types, out of range, unknown notes, strict similar on a bad id,
    filters that match nothing, tags being typed and every MCP tool: all present."""
    codes = {got["daemon"]["error"][0] for got in answers.values() if "error" in got["daemon"]}
    assert codes == {"bad_args", "bad_date", "not_found"}
    strict = answers[_id(("similar", {"note_id": "notes:nope.md", "strict": True}))]
    assert strict["daemon"]["error"][0] == "not_found"
    assert strict["mcp"][0] == "error"
    lenient = answers[_id(("similar", {"note_id": "notes:nope.md"}))]
    assert lenient["cli"] == {"result": {"hits": [], "notices": []}}
    nothing = answers[_id(("search", {"query": "bread", "tags": ["nosuchtag"]}))]
    assert nothing["cli"]["result"]["notices"] == ["No notes are tagged #nosuchtag."]
    typed = answers[_id(("search", {"query": "#rec"}))]
    assert typed["cli"]["result"]["tags"][0]["tag"] == "recipes"
    found = answers[_id(("search", {"query": "banana bread", "limit": 3}))]
    assert found["cli"]["result"]["hits"][0]["note_id"] == BREAD
    assert found["cli"]["result"]["new_note"] == []  # Markdown folders have no app
    asked = {TOOL_OF[c[0]].name for c in CASES if answers[_id(c)]["mcp"] is not None}
    assert asked == set(tools.TOOLS)


def test_the_cli_says_an_error_as_the_daemon_words_it(home: Path, notes_config):
    """``read_op`` without a daemon: the same message, as ``notewell: ...`` and exit 1."""
    with pytest.raises(SystemExit, match=r"^notewell: limit: must be from 1 to 50, got 80$"):
        reads.read_op(argparse.Namespace(embedder=FakeEmbedder), "search", query="x",
                      limit=80)


def test_an_answer_that_moves_with_the_clock_is_never_kept(home, notes_config):
    """The daemon keeps a search's answer only when ``api.Searched.timeless`` says so,
    from the query the search read: "since:7d" typed or given is answered anew once the
    engine's clock has moved (the prepared answers' own clock has not: none expired)."""
    import time

    from notewell.engine import Engine
    from reliability_helpers import FakeClock

    moving = FakeClock(wall=time.time())
    d = inproc_daemon(notes_config, engine_factory=lambda c: Engine(
        c, embedder=FakeEmbedder(), clock=moving))
    with d:
        asks = [{"query": "banana bread since:7d"},
                {"query": "banana bread", "modified_after": "7d"}]
        for args in asks:
            assert ask("search", **args)["result"]["hits"][0]["note_id"] == BREAD
        plain = ask("search", query="banana bread")["result"]
        moving.advance(8 * 86_400)
        for args in asks:
            assert ask("search", **args)["result"]["hits"] == []
        assert ask("search", query="banana bread")["result"] == plain
