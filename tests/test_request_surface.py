"""One request surface: each read op's arguments are checked in one place
(``wire.requests``), so a bad argument gets the same error, with the same limit, from the
daemon, from the CLI when no daemon runs, and from the MCP tool; and the MCP tools' input
schemas are what that place generates."""

from __future__ import annotations

import argparse

import anyio
import pytest
from helpers import start_daemon, wait_synced, write_notes
from notewell import config
from notewell.agents import tools
from notewell.agents.link import DaemonLink, Refused
from notewell.agents.server import NotewellTools
from notewell.cli import reads
from notewell.model.fake import FakeEmbedder
from notewell.search.dates import DateError
from notewell.wire import client, paths, protocol, requests

TOOL_OF = {spec.op: name for name, spec in tools.TOOLS.items()}
PLAN = "notes:work/plan.md"


def save_config(home, notes) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NOTEWELL_HOME", str(home))
        config.save(config.Config(sources=(config.SourceConfig("notes", "markdown",
                                                               str(notes)),)))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A daemon (fake embedder) over the small note folder, and its socket."""
    root = tmp_path_factory.mktemp("surface")
    home = root / "home"
    home.mkdir()
    save_config(home, write_notes(root / "notes"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NOTEWELL_HOME", str(home))
        d = start_daemon(home)
        wait_synced(d)
        socket = paths.socket_path()
    yield socket
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NOTEWELL_HOME", str(home))
        d.stop()


@pytest.fixture
def no_daemon_home(tmp_path, monkeypatch):
    """A home where no daemon runs, over the same notes: the CLI answers in process."""
    home = tmp_path / "alone"
    home.mkdir()
    save_config(home, write_notes(tmp_path / "notes"))
    monkeypatch.setenv("NOTEWELL_HOME", str(home))
    return home


# (op, arguments, code, message): every argument here is one the op's MCP tool takes too.
CASES = [
    ("search", {"query": "x", "limit": 0}, "bad_args", "limit: must be from 1 to 50, got 0"),
    ("search", {"query": "x", "limit": 51}, "bad_args",
     "limit: must be from 1 to 50, got 51"),
    ("search", {"query": "x", "limit": "8"}, "bad_args",
     "limit: must be an integer, got a string"),
    ("search", {"query": "x", "tags": "work"}, "bad_args",
     "tags: must be a list of strings, got a string"),
    ("search", {"query": "x", "tags": ["t" * 201]}, "bad_args",
     "tags: each at most 200 characters, got 201"),
    ("search", {"query": "x", "source": 3}, "bad_args",
     "source: must be a string, got an integer"),
    ("search", {"query": "x", "modified_after": "someday"}, "bad_date",
     "modified_after: cannot read 'someday' as a date"),
    ("search", {"query": "x", "modified_before": "x" * 41}, "bad_args",
     "modified_before: at most 40 characters, got 41"),
    ("note", {"note_id": PLAN, "max_chars": 40_001}, "bad_args",
     "max_chars: must be from 1 to 40000, got 40001"),
    ("note", {"note_id": PLAN, "offset": -1}, "bad_args", "offset: must be 0 or more, got -1"),
    ("note", {"note_id": " "}, "bad_args", "note_id: must not be empty"),
    ("note", {}, "bad_args", "note_id: required"),
    ("similar", {"note_id": PLAN, "limit": 51}, "bad_args",
     "limit: must be from 1 to 50, got 51"),
    ("recent", {"limit": 0}, "bad_args", "limit: must be from 1 to 50, got 0"),
    ("recent", {"tags": [f"t{i}" for i in range(21)]}, "bad_args",
     "tags: at most 20 items, got 21"),
    ("tags", {"prefix": 3}, "bad_args", "prefix: must be a string, got an integer"),
]


def daemon_error(socket: str, op: str, args: dict) -> tuple[str, str]:
    reply = client.ask(protocol.request(op, **args), timeout=10, socket_path=socket)
    assert reply["ok"] is False, reply
    return reply["error"]["code"], reply["error"]["message"]


def cli_error(op: str, args: dict) -> tuple[str, str]:
    """The CLI's one-shot path (no daemon listens): the code of the error it raises, and
    the message it exits with."""
    namespace = argparse.Namespace(embedder=FakeEmbedder)
    with pytest.raises(SystemExit) as exit_:
        reads.read_op(namespace, op, **args)
    cause = exit_.value.__context__
    code = "bad_date" if isinstance(cause, DateError) else getattr(cause, "code", None)
    return code, str(exit_.value.code).removeprefix("notewell: ")


def mcp_error(socket: str, op: str, args: dict) -> tuple[str, str, str]:
    """The tool's own check, else the daemon's refusal: its code and message; and the
    text the agent reads from the whole tool call."""
    name = TOOL_OF[op]
    # In the daemon the link asks its handlers in-process; here, the same handlers
    # through the socket.
    link = DaemonLink(lambda req: client.ask(req, timeout=10, socket_path=socket))
    try:
        checked = tools.check(tools.TOOLS[name], args)
        op_, request = tools.request(name, checked)
        with pytest.raises(Refused) as refused:
            link.ask(op_, **request)
        code, message = refused.value.code, str(refused.value)
    except requests.BadArguments as e:
        code, message = e.code, str(e)
    result = anyio.run(NotewellTools(link).call, name, args)
    assert result.is_error
    return code, message, result.content[0].text


@pytest.mark.parametrize(("op", "args", "code", "message"), CASES,
                         ids=[f"{op}-{'-'.join(args) or 'none'}" for op, args, *_ in CASES])
def test_a_bad_argument_gets_the_same_error_from_the_daemon_the_cli_and_the_mcp_tool(
        served, no_daemon_home, op, args, code, message):
    from_daemon = daemon_error(served, op, args)
    from_cli = cli_error(op, args)
    *from_mcp, agent_text = mcp_error(served, op, args)
    assert from_daemon[0] == from_cli[0] == from_mcp[0] == code
    assert from_daemon[1] == from_cli[1] == from_mcp[1]
    assert from_daemon[1].startswith(message), from_daemon[1]
    assert agent_text == f"{TOOL_OF[op]}: {from_daemon[1]}"


def test_a_long_query_is_cut_for_a_person_and_refused_to_an_agent():
    """The zsh client sends what was typed or pasted (up to 60,000 characters): the daemon
    and the CLI search its first 1,000; an agent is told, so it knows what was searched."""
    long = "plan " * 1000
    assert requests.request_args("search", {"query": long})["query"] == long[:1000]
    with pytest.raises(requests.BadArguments, match=r"^query: at most 1000 characters, "
                       r"got 5000$"):
        tools.check(tools.TOOLS["search_notes"], {"query": long})


def test_the_mcp_input_schemas_are_the_ones_the_ops_generate():
    for name, spec in tools.TOOLS.items():
        shown = {**spec.input_schema, "properties": {
            k: {kk: vv for kk, vv in v.items() if kk != "description"}
            for k, v in spec.input_schema["properties"].items()}}
        if name == "similar_notes":  # a note_id (op similar), or text instead (op related)
            text = shown["properties"].pop("text")
            assert text == requests.schema("related", ("text",), agents=True)[
                "properties"]["text"]
            assert shown["required"] == []
            shown["required"] = ["note_id"]  # one of the two: checked by tools.check
        assert shown == requests.schema(spec.op, tuple(shown["properties"]), agents=True)
        # And, read independently of the generator, each bound is the op's own.
        for arg_name, prop in shown["properties"].items():
            arg = requests.OPS[spec.op][arg_name]
            assert prop.get("minimum") == arg.minimum, (name, arg_name)
            assert prop.get("maximum") == arg.maximum, (name, arg_name)
            if arg.max_length is not None:
                assert prop["maxLength"] == arg.max_length, (name, arg_name)
            if arg_name not in shown["required"]:
                assert prop["default"] == requests.default(spec.op, arg_name, "agent")
    assert tools.TOOLS["get_note"].input_schema["properties"]["max_chars"] == {
        "type": "integer", "minimum": 1, "maximum": requests.MAX_PAGE_CHARS,
        "default": requests.PAGE_CHARS}
    search = tools.TOOLS["search_notes"].input_schema
    assert search["properties"]["limit"]["maximum"] == requests.MAX_LIMIT
    assert search["properties"]["limit"]["default"] == 8
    assert search["required"] == ["query"]


def test_the_cli_options_default_to_the_ops_terminal_defaults():
    from notewell.cli.parser import build_parser

    parser = build_parser()
    assert parser.parse_args(["search", "x"]).limit == requests.default("search", "limit",
                                                                        "cli") == 10
    assert parser.parse_args(["show", PLAN]).max_chars == requests.PAGE_CHARS
    assert parser.parse_args(["similar", PLAN]).limit == 10
