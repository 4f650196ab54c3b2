"""``notewell mcp`` (the relay) through the official SDK's own client (``ClientSession``
over stdio) against a real daemon in a subprocess, which hosts the session: the tools and
their schemas, every tool's structured answer checked against its output schema, the
errors an agent can cause, the daemon being down, and the modules the relay loads."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from helpers import REPO, server_params, start_daemon, subprocess_env, wait_synced, write_notes
from mcp import ClientSession
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from notewell import config

TOOLS = {"search_notes", "get_note", "similar_notes", "recent_notes", "list_tags",
         "index_status"}
HEAVY = ("mcp", "mcp_types", "pydantic", "anyio", "json", "logging", "argparse",
         "notewell.agents.server", "notewell.agents.session", "notewell.ops",
         "numpy", "onnxruntime", "tokenizers", "apsw", "sqlite_vec", "msgpack", "watchdog",
         "notewell.index", "notewell.model", "notewell.search", "notewell.engine",
         "notewell.serve", "notewell.ingest", "notewell.sources", "notewell.config")
FILL = " ".join(f"word{i}" for i in range(45))  # sections this long are not merged
HANDBOOK = ("# Handbook\n\nHow the team works. #work/handbook\n\n## Setup\n\nInstall the "
            f"toolchain with brew. {FILL}\n\n## Releases\n\nTag, then push the release "
            f"branch. {FILL}\n")



def session(home: Path, fn: Callable[[ClientSession], Awaitable[Any]], *extra: str,
            python_c: str | None = None) -> tuple[Any, str]:
    """Run ``fn`` in an initialized MCP session with ``notewell mcp``; its result and
    what the server wrote to stderr."""
    with tempfile.TemporaryFile("w+") as err:
        async def main() -> Any:
            async with stdio_client(server_params(home, *extra, python_c=python_c),
                                    errlog=err) as (read, write), \
                    ClientSession(read, write) as s:
                await s.initialize()
                return await fn(s)

        result = anyio.run(main)
        err.seek(0)
        return result, err.read()


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory):
    """A daemon (fake embedder) over a small note folder, for the whole module."""
    root = tmp_path_factory.mktemp("mcp")
    home = root / "home"
    home.mkdir()
    notes = write_notes(root / "notes")
    write_notes(notes, {"work/handbook.md": HANDBOOK})
    (root / "outside.md").write_text("# Outside\n\nnot a note of any source\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NOTEWELL_HOME", str(home))
        config.save(config.Config(sources=(config.SourceConfig(
            "notes", "markdown", str(notes), ("private/**",)),)))
        d = start_daemon(home)
        try:
            wait_synced(d)
            yield home
        finally:
            d.stop()


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


# -- listing -----------------------------------------------------------------------------------


def test_tools_are_read_only_with_input_and_output_schemas(vault):
    async def listing(s: ClientSession):
        return (await s.list_tools()).tools, (await s.list_resource_templates())

    tools, templates = session(vault, listing)[0]
    assert {t.name for t in tools} == TOOLS
    for t in tools:
        a = t.annotations
        assert (a.read_only_hint, a.idempotent_hint, a.open_world_hint) == (True, True, False)
        assert a.destructive_hint is False
        assert t.input_schema["additionalProperties"] is False
        assert t.output_schema and t.output_schema["type"] == "object"
        jsonschema.Draft202012Validator.check_schema(t.input_schema)
        jsonschema.Draft202012Validator.check_schema(t.output_schema)
        assert t.description
    search = next(t for t in tools if t.name == "search_notes")
    props = search.input_schema["properties"]
    assert props["limit"]["minimum"] == 1 and props["limit"]["maximum"] == 50
    assert props["limit"]["default"] == 8 and search.input_schema["required"] == ["query"]
    assert "7d" in search.description
    (template,) = templates.resource_templates
    assert template.uri_template == "notewell://note/{note_id}"
    assert template.mime_type == "text/markdown"


# -- every tool ------------------------------------------------------------------------------------


def test_every_tool_answers_with_structured_content_that_fits_its_schema(vault):
    async def calls(s: ClientSession):
        schemas = {t.name: t.output_schema for t in (await s.list_tools()).tools}
        out = {}
        search = await s.call_tool("search_notes", {"query": "release branch"})
        note_id = search.structured_content["hits"][0]["note_id"]
        out["search_notes"] = search
        out["get_note"] = await s.call_tool("get_note", {"note_id": note_id})
        out["section"] = await s.call_tool("get_note", {"note_id": note_id,
                                                        "heading": "setup"})
        out["page"] = await s.call_tool("get_note", {"note_id": note_id, "max_chars": 30})
        out["similar_notes"] = await s.call_tool("similar_notes", {"note_id": note_id,
                                                                   "limit": 2})
        out["recent_notes"] = await s.call_tool("recent_notes", {"limit": 3})
        out["recent_tagged"] = await s.call_tool("recent_notes", {"tags": ["work"]})
        out["list_tags"] = await s.call_tool("list_tags", {})
        out["tags_prefix"] = await s.call_tool("list_tags", {"prefix": "work/"})
        out["index_status"] = await s.call_tool("index_status", {})
        out["filtered"] = await s.call_tool("search_notes", {
            "query": "release", "tags": ["work"], "source": "notes",
            "modified_after": "2000-01-01", "modified_before": "2999", "limit": 3})
        out["resource"] = await s.read_resource(f"notewell://note/{note_id}")
        out["encoded"] = await s.read_resource("notewell://note/notes%3Awork%2Fhandbook.md")
        return schemas, out

    (schemas, out), stderr = session(vault, calls)
    tool_of = {"section": "get_note", "page": "get_note", "recent_tagged": "recent_notes",
               "tags_prefix": "list_tags", "filtered": "search_notes"}
    for key, result in out.items():
        if key in ("resource", "encoded"):
            continue
        assert not result.is_error, (key, text_of(result))
        jsonschema.validate(result.structured_content, schemas[tool_of.get(key, key)])
        assert text_of(result).strip()

    search = out["search_notes"]
    hit = search.structured_content["hits"][0]
    assert hit["title"] == "Handbook" and hit["heading_path"] == "Releases"
    assert hit["note_id"] == "notes:work/handbook.md" and hit["tags"] == ["work/handbook"]
    assert hit["modified"][:2] == "20" and search.structured_content["behind"] is None
    assert "note_id: notes:work/handbook.md" in text_of(search)
    assert "1. Handbook — Releases [notes, 20" in text_of(search)
    # Why it matched (issue 35.3): the query's words in the snippet, and its passages.
    assert {hit["snippet"][a:b].lower() for a, b in hit["spans"]} >= {"release", "branch"}
    assert hit["passages"][0]["heading_path"] == "Releases"
    assert {hit["passages"][0]["text"][a:b].lower()
            for a, b in hit["passages"][0]["spans"]} >= {"release", "branch"}

    note = out["get_note"].structured_content
    assert note["text"] == HANDBOOK and note["next_offset"] is None
    assert note["headings"] == ["Setup", "Releases"]
    assert text_of(out["get_note"]).startswith("# Handbook\n[notes:work/handbook.md · notes")
    section = out["section"].structured_content
    assert section["text"] == f"## Setup\n\nInstall the toolchain with brew. {FILL}"
    page = out["page"].structured_content
    assert len(page["text"]) <= 30 and page["next_offset"]
    assert f"offset={page['next_offset']}" in text_of(out["page"])

    similar = out["similar_notes"].structured_content["hits"]
    assert 1 <= len(similar) <= 2 and all(h["note_id"] != hit["note_id"] for h in similar)
    assert len(out["recent_notes"].structured_content["hits"]) == 3
    assert [h["title"] for h in out["recent_tagged"].structured_content["hits"]] == [
        "Handbook"]
    tags = {t["tag"]: t["notes"] for t in out["list_tags"].structured_content["tags"]}
    assert tags["work"] == 1 and tags["db/maintenance"] == 1 and tags["recipes"] == 1
    assert out["tags_prefix"].structured_content == {
        "tags": [{"tag": "work/handbook", "notes": 1}], "total": 1}
    status = out["index_status"].structured_content
    assert status["notes"] == 5 and status["state"] == "ready"
    assert status["sources"][0]["name"] == "notes" and status["errors"] == []
    assert [h["title"] for h in out["filtered"].structured_content["hits"]] == ["Handbook"]

    for key in ("resource", "encoded"):
        (contents,) = out[key].contents
        assert contents.mime_type == "text/markdown" and contents.text == note["text"]
    assert "Traceback" not in stderr


def test_eight_hits_stay_compact(vault):
    async def search(s: ClientSession):
        return await s.call_tool("search_notes", {"query": "the and with a", "limit": 25})

    result = session(vault, search)[0]
    assert not result.is_error
    for hit in result.structured_content["hits"]:
        assert len(hit["snippet"]) <= 240
    # About four characters a token: a hit's entry stays under about 250 tokens.
    per_hit = len(text_of(result)) / max(1, len(result.structured_content["hits"]))
    assert per_hit < 1000


# -- errors ---------------------------------------------------------------------------------


ERRORS = [
    ("get_note", {"note_id": "notes:nope.md"}, "no note with id 'notes:nope.md'"),
    ("get_note", {"note_id": "notes:../outside.md"}, "no note with id"),
    ("get_note", {"note_id": "notes:private/secret.md"}, "no note with id"),
    ("get_note", {"note_id": "notes:work/handbook.md", "heading": "Nope"},
     "no heading 'Nope'; its headings: Setup; Releases"),
    ("get_note", {"note_id": "notes:work/handbook.md", "offset": -1}, "offset: must be 0"),
    ("get_note", {"note_id": "notes:work/handbook.md", "max_chars": 100_000},
     "max_chars: must be from 1 to 40000, got 100000"),
    ("similar_notes", {"note_id": "notes:nope.md"}, "no note with id 'notes:nope.md'"),
    ("search_notes", {"query": "x", "limit": 0}, "limit: must be from 1 to 50, got 0"),
    ("search_notes", {"query": "x", "limit": 51}, "limit: must be from 1 to 50, got 51"),
    ("search_notes", {"query": "x", "limit": "8"}, "limit: must be an integer, got a string"),
    ("search_notes", {"query": "x", "limit": True}, "limit: must be an integer"),
    ("search_notes", {"query": "x", "modified_after": "last tuesday"},
     "modified_after: cannot read 'last tuesday' as a date; use an ISO date (2025-03-01)"),
    ("search_notes", {"query": "x", "modified_before": "3 months"}, "7d, 2w, 3m, 1y"),
    ("search_notes", {"query": "x", "color": "red"},
     "unknown argument 'color'; search_notes takes: query, limit, tags, source"),
    ("search_notes", {"query": "x" * 100_000},
     "query: at most 1000 characters, got 100000"),
    ("search_notes", {"query": "   "}, "query: must not be empty"),
    ("search_notes", {}, "query: required"),
    ("search_notes", {"query": "x", "tags": "work"}, "tags: must be a list of strings"),
    ("recent_notes", {"limit": 51}, "limit: must be from 1 to 50"),
    ("list_tags", {"prefix": 3}, "prefix: must be a string, got an integer"),
    ("index_status", {"verbose": True}, "unknown argument 'verbose'; index_status takes: "
     "no arguments"),
    ("delete_note", {"note_id": "x"}, "unknown tool 'delete_note'"),
]


def test_errors_name_what_is_wrong_and_the_session_stays_up(vault):
    async def calls(s: ClientSession):
        results = [await s.call_tool(name, args) for name, args, _ in ERRORS]
        after = await s.call_tool("search_notes", {"query": "banana"})
        try:
            await s.read_resource("notewell://note/notes%3A..%2Foutside.md")
            resource_error = None
        except Exception as e:
            resource_error = str(e)
        return results, after, resource_error

    (results, after, resource_error), stderr = session(vault, calls)
    for (name, args, words), result in zip(ERRORS, results):
        assert result.is_error, (name, args)
        assert words in text_of(result), (name, text_of(result))
        assert len(text_of(result)) < 800
    assert not after.is_error and after.structured_content["hits"][0]["title"] == "Banana bread"
    assert resource_error and "no note with id" in resource_error
    assert "Traceback" not in stderr


def test_daemon_down_the_initialize_error_says_what_to_run(tmp_path):
    """No daemon and --no-start: the relay answers initialize itself with an error the
    client shows, saying what to run; stdout carries nothing else."""
    home = tmp_path / "home"
    home.mkdir()
    with tempfile.TemporaryFile("w+") as err:
        async def main() -> str:
            async with stdio_client(server_params(home), errlog=err) as (read, write), \
                    ClientSession(read, write) as s:
                with pytest.raises(MCPError) as e:
                    await s.initialize()
                return str(e.value)

        message = anyio.run(main)
    assert "not running" in message and "notewell serve" in message
    assert "notewell agent install" in message


def test_the_mcp_process_never_loads_the_model_numpy_or_the_index(vault):
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join("
             "sorted(sys.modules)) + '\\n'))\n"
             "from notewell.cli import main\n"
             "sys.exit(main(['mcp', '--no-start']))\n")

    async def calls(s: ClientSession):
        for name, args in (("search_notes", {"query": "vacuum"}),
                           ("get_note", {"note_id": "notes:work/handbook.md"}),
                           ("index_status", {}), ("list_tags", {})):
            assert not (await s.call_tool(name, args)).is_error

    stderr = session(vault, calls, python_c=probe)[1]
    line = next(x for x in stderr.splitlines() if x.startswith("MODULES "))
    loaded = set(line.split()[1:])
    assert "notewell.agents.relay" in loaded
    heavy = {m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY)}
    assert not heavy, heavy


def test_logs_go_to_stderr_and_stdout_carries_only_the_protocol(vault):
    """Every line the server writes to stdout is a JSON-RPC message."""
    import subprocess

    env = subprocess_env(vault)
    env["PYTHONPATH"] = str(REPO / "daemon")
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "search_notes", "arguments": {"query": "vacuum"}}},
    ]
    proc = subprocess.Popen([sys.executable, "-m", "notewell", "-v", "mcp", "--no-start"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = []
        for m in messages:
            proc.stdin.write(json.dumps(m) + "\n")
            proc.stdin.flush()
            if "id" in m:  # wait for its answer before the next message
                lines.append(json.loads(proc.stdout.readline()))
        proc.stdin.close()
        rest = proc.stdout.read()
        stderr = proc.stderr.read()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [m.get("id") for m in lines] == [1, 2] and not rest.strip()
    assert lines[1]["result"]["structuredContent"]["hits"][0]["title"] == "Postgres vacuum"
    assert "Traceback" not in stderr
