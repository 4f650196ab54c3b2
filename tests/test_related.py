"""Related notes for any text (issue 35.1): ``Engine.related`` with the real model on the
demo notes (a paraphrase finds its note first; a long text counts whole; a note's own
file leaves it out), the ``related`` op through a daemon, the CLI, the MCP tool, and
what Alfred shows for empty, binary and huge selections."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import numpy as np
import pytest
from helpers import NOTES, notewell_command, subprocess_env
from notewell import config
from notewell.agents import tools
from notewell.agents.link import DaemonLink
from notewell.agents.server import NotewellTools
from notewell.engine import ArgumentError, Engine
from notewell.ingest.chunking import ChunkSettings
from notewell.ingest.selection import text_vector
from notewell.launcher import alfred_related
from notewell.model.fake import FakeEmbedder
from notewell.ops.demo import demo_notes_dir
from notewell.wire import client, protocol
from notewell.wire.requests import MAX_RELATED_CHARS

DEMO = demo_notes_dir()

# Each in other words than its note's: ``test_paraphrases_share_no_word_with_their_note``.
PARAPHRASES = {
    "home/fix-leaking-kitchen-tap.md":
        "Our sink faucet keeps dribbling through the night. Probably a perished seal "
        "inside it: shut off the water beneath the counter, dismantle it, fit a new seal.",
    "health/sleep-hygiene.md":
        "I cannot nod off at night and lie restless for ages, thoughts spinning. The "
        "doctor recommended a behavioural programme: rise identically early each day, no "
        "screens late, no espresso after lunch.",
    "howto/rollback-bad-deploy.md":
        "Production broke straight after we pushed a release. Our habit: restore the "
        "earlier build at once, dig into the cause later, and halt automatic syncing so "
        "it doesn't redeploy.",
}
SMALL_WORDS = {"the", "and", "for", "with", "that", "this", "from", "into", "them", "they",
               "their", "have", "been", "just", "once", "after", "it's", "doesn't"}


def demo_text(rel: str) -> str:
    with open(f"{DEMO}/{rel}", encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="module")
def demo(tmp_path_factory, real_embedder):
    """An engine over the demo notes with the shipped model."""
    root = tmp_path_factory.mktemp("related")
    cfg = config.Config(sources=(config.SourceConfig("demo", "markdown", DEMO),))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NOTEWELL_HOME", str(root / "home"))
        engine = Engine(cfg, embedder=real_embedder, index_dir=str(root / "index"))
        engine.sync()
        yield engine
        engine.close()


def ids(result) -> list[str]:
    return [h.note_id for h in result.hits]


# -- the real model on the demo notes ---------------------------------------------------------


def test_paraphrases_share_no_word_with_their_note():
    for rel, text in PARAPHRASES.items():
        note = demo_text(rel).lower()
        words = set(re.findall(r"[a-z']{4,}", text.lower())) - SMALL_WORDS
        shared = [w for w in words if re.search(rf"\b{re.escape(w)}\b", note)]
        assert not shared, (rel, shared)


@pytest.mark.parametrize("rel", sorted(PARAPHRASES))
def test_a_paraphrase_of_a_note_finds_that_note_first(demo, rel):
    with demo.reading() as view:
        assert ids(view.related(PARAPHRASES[rel], limit=5))[0] == f"demo:{rel}"


def test_a_long_text_counts_whole_not_only_its_first_window(demo):
    # Two notes' text in one selection: the second is past the model's window (256
    # tokens), yet found; reading only the first window finds the first note alone.
    first, second = "projects/kitchen-renovation.md", "health/sleep-hygiene.md"
    text = demo_text(first) + "\n\n" + demo_text(second)
    with demo.reading() as view:
        found = ids(view.related(text, limit=3))
    assert {f"demo:{first}", f"demo:{second}"} <= set(found[:2]), found


def test_selected_text_of_a_note_lists_it_but_its_file_leaves_it_out(demo):
    rel = "home/fix-leaking-kitchen-tap.md"
    with demo.reading() as view:
        assert ids(view.related(demo_text(rel), limit=3))[0] == f"demo:{rel}"
        from_file = ids(view.related_file(f"{DEMO}/{rel}", limit=5))
    assert f"demo:{rel}" not in from_file and len(from_file) == 5
    # A file outside every source is read as it is, and nothing is left out.
    with demo.reading() as view:
        assert from_file[0] in ids(view.related(demo_text(rel), limit=5))


def test_filters_restrict_related_notes(demo):
    text = PARAPHRASES["home/fix-leaking-kitchen-tap.md"]
    with demo.reading() as view:
        health = view.related(text, limit=10, tags=["health"])
    assert health.hits and all("health" in h.tags for h in health.hits)
    with demo.reading() as view:
        none = view.related(text, limit=10, source="nowhere")
    assert none.hits == [] and none.notices


def test_a_file_of_another_kind_or_too_big_is_refused_with_what_to_do(demo, tmp_path):
    other = tmp_path / "photo.jpg"
    other.write_bytes(b"\xff\xd8\xff" + bytes(range(256)) * 4)
    with (pytest.raises(ArgumentError, match=r"not a Markdown, text or PDF file"),
          demo.reading() as view):
        view.related_file(str(other))
    binary = tmp_path / "blob.md"
    binary.write_bytes(b"\x00\x01\x02 not text" * 50)
    with pytest.raises(ArgumentError, match=r"binary"), demo.reading() as view:
        view.related_file(str(binary))
    with pytest.raises(ArgumentError, match=r"No such file"), demo.reading() as view:
        view.related_file(str(tmp_path / "gone.md"))


# -- how the text is read ------------------------------------------------------------------------


class PrefixedEmbedder(FakeEmbedder):
    """A model with e5's prefixes: the query side must not read a text for related notes,
    which is compared with passages embedded as passages."""

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        raise AssertionError("related notes embedded the text as a query")


def test_the_text_is_embedded_as_passages_and_averaged():
    embedder = PrefixedEmbedder()
    chunker = ChunkSettings(max_pieces=20, min_pieces=5, overlap_pieces=2)
    text = " ".join(f"word{i}" for i in range(200))
    vector = text_vector(embedder, chunker, text)
    from notewell.ingest.chunking import chunk_note

    passages = embedder.embed_batch([c.embed_text("") for c in chunk_note("", text, chunker)])
    assert len(passages) > 3
    mean = passages.mean(axis=0)
    assert np.allclose(vector, mean / np.linalg.norm(mean), atol=1e-6)
    assert abs(float(np.linalg.norm(vector)) - 1) < 1e-5


def test_blank_binary_and_huge_texts(engine):
    with pytest.raises(ArgumentError, match="text: is empty"), engine.reading() as view:
        view.related(" \n\t")
    with pytest.raises(ArgumentError, match="text: looks like binary"), engine.reading() as view:
        view.related("PK\x03\x04\x00\x00" + "\ufffd" * 50)
    with pytest.raises(ArgumentError, match="text: looks like binary"), engine.reading() as view:
        view.related("\x01\x02\x03\x04\x05\x06\x07\x08" * 20)
    with engine.reading() as view:
        result = view.related("banana bread " * 2_000)  # 26,000 characters
    assert result.hits and result.notices == [
        f"only the first {MAX_RELATED_CHARS:,} characters were read"]
    with engine.reading() as view:
        assert view.related("banana", truncated=True).notices == result.notices


# -- the op through a daemon, the CLI, MCP and Alfred --------------------------------------------


def ask(op: str, **args) -> dict:
    return client.ask(protocol.request(op, **args), timeout=20)


def test_the_related_op_answers_json_and_alfred(daemon, notes_dir):
    reply = ask("related", text=NOTES["kitchen/banana-bread.md"], limit=2)
    assert reply["ok"], reply
    assert reply["result"]["hits"][0]["note_id"] == "notes:kitchen/banana-bread.md"
    reply = ask("related", path=str(notes_dir / "kitchen/banana-bread.md"), limit=3)
    assert "notes:kitchen/banana-bread.md" not in [h["note_id"] for h in
                                                   reply["result"]["hits"]]
    doc = json.loads(ask("related", text="bananas", format="alfred")["result"]["alfred"])
    hit = next(i for i in doc["items"] if i.get("uid") == "notes:kitchen/banana-bread.md")
    # No query: the stale-Enter guard compares an item's query with the newest typed.
    assert "query" not in hit["variables"]
    assert all("query" not in m["variables"] for m in hit["mods"].values())
    assert hit["mods"]["fn"]["arg"] == "similar:notes:kitchen/banana-bread.md"


@pytest.mark.parametrize(("args", "message"), [
    ({}, "text: required (or path"),
    ({"text": "a", "path": "/x.md"}, "text: required (or path"),
    ({"text": "x" * (MAX_RELATED_CHARS + 1)}, f"text: at most {MAX_RELATED_CHARS} char"),
    ({"text": "\x00\x00\x00\x00"}, "text: looks like binary data"),
    ({"path": "/etc/hostname"}, "path: 'hostname' is not a Markdown, text or PDF file"),
])
def test_the_related_op_refuses_what_it_cannot_read(daemon, args, message):
    reply = ask("related", **args)
    assert not reply["ok"] and reply["error"]["code"] == "bad_args"
    assert reply["error"]["message"].startswith(message), reply
    assert ask("ping")["ok"]  # and keeps serving


def test_the_cli_reads_text_from_an_argument_or_stdin(daemon, home):
    def related(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(notewell_command("related", *args), input=stdin,
                              env=subprocess_env(home), capture_output=True, timeout=60)

    out = related("bananas, flour and butter", "--json", "--limit", "1")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)[0]["note_id"] == "notes:kitchen/banana-bread.md"
    piped = related("--json", "--limit", "1", stdin=b"bananas, flour and butter")
    assert json.loads(piped.stdout) == json.loads(out.stdout)
    assert json.loads(related("-", "--json", "--limit", "1",
                              stdin=b"bananas, flour and butter").stdout)
    empty = related(stdin=b"  \n")
    assert empty.returncode == 1 and b"text: is empty" in empty.stderr
    binary = related(stdin=bytes(range(256)) * 10)
    assert binary.returncode == 1 and b"looks like binary" in binary.stderr
    huge = related("--limit", "1", stdin=b"banana bread " * 2_000)
    assert huge.returncode == 0 and b"only the first 10,000 characters" in huge.stdout


def test_the_mcp_similar_tool_takes_text(daemon):
    link = DaemonLink(lambda req: client.ask(req, timeout=20))
    server = NotewellTools(link)
    result = anyio.run(server.call, "similar_notes", {"text": "bananas and butter",
                                                      "limit": 2})
    assert not result.is_error, result.content[0].text
    hits = result.structured_content["hits"]
    assert hits[0]["note_id"] == "notes:kitchen/banana-bread.md"
    assert "similar to the text" in result.content[0].text
    both = anyio.run(server.call, "similar_notes", {"text": "x", "note_id": "notes:a.md"})
    assert both.is_error and "not both" in both.content[0].text
    props = tools.TOOLS["similar_notes"].input_schema["properties"]
    assert props["text"]["maxLength"] == MAX_RELATED_CHARS


def alfred(arg: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "notewell", "alfred", "related", arg],
                         capture_output=True, timeout=60)
    assert out.returncode == 0 and not out.stderr, out.stderr
    return json.loads(out.stdout)


def test_alfred_empty_binary_and_huge_selections_get_a_clear_item(daemon, notes_dir):
    (empty,) = alfred("  ")["items"]
    assert empty["title"] == "Nothing selected" and "Universal Action" in empty["subtitle"]
    (binary,) = alfred("\x01\x02\x03\x04" * 100)["items"]
    assert binary["title"] == "notewell cannot read this selection"
    assert binary["subtitle"].startswith("Looks like binary data, not text")
    huge = alfred("banana bread " * 2_000)["items"]
    assert huge[0]["title"] == "Only the first 10,000 characters were read"
    assert huge[1]["uid"] == "notes:kitchen/banana-bread.md"
    found = alfred(str(notes_dir / "kitchen/banana-bread.md"))["items"]
    assert found and "notes:kitchen/banana-bread.md" not in [i.get("uid") for i in found]
    (other,) = alfred(str(notes_dir.parent / "home" / "config.toml"))["items"]
    assert other["title"] == "notewell cannot read this file"


def test_alfred_says_when_the_daemon_is_down(home):
    doc = json.loads(alfred_related.alfred_output("some text"))
    assert doc["items"][0]["title"] == "notewell is not running"


# -- the Alfred workflow's objects, parsed back from the built workflow -----------------------


def built_plist(tmp_path) -> tuple[dict, Path]:
    from launcher_helpers import unpack
    from notewell.launcher import alfred_workflow

    built = alfred_workflow.build(str(tmp_path / "out" / "notewell.alfredworkflow"))
    wf = tmp_path / "wf"
    return unpack(Path(built), wf), wf


def test_the_universal_action_and_the_hotkey_feed_the_related_script_filter(home, tmp_path):
    plist, _ = built_plist(tmp_path)
    by_type: dict[str, list[dict]] = {}
    for obj in plist["objects"]:
        by_type.setdefault(obj["type"], []).append(obj)
    (ua,) = by_type["alfred.workflow.trigger.universalaction"]
    assert ua["config"]["name"] == "Related notes"
    assert ua["config"]["acceptstext"] is True and ua["config"]["acceptsfiles"] is True
    assert ua["config"]["acceptsmulti"] == 0
    (hotkey,) = by_type["alfred.workflow.trigger.hotkey"]
    # Left unset for the user to bind; its argument is the selection in macOS.
    assert hotkey["config"]["hotkey"] == 0 and hotkey["config"]["hotmod"] == 0
    assert hotkey["config"]["argument"] == 1
    (related,) = [o for o in by_type["alfred.workflow.input.scriptfilter"]
                  if o["config"]["keyword"] == "{var:related_keyword}"]
    for trigger in (ua, hotkey):
        assert [w["destinationuid"] for w in plist["connections"][trigger["uid"]]] == [
            related["uid"]]
    cfg = related["config"]
    assert cfg["scriptargtype"] == 1 and "{query}" not in cfg["script"]
    assert cfg["argumenttype"] == 1  # optional: an empty selection gets its item
    assert cfg["script"] == 'source ./notewell-query.zsh --alfred-related "$1"'
    # Its items act as the search's: the same Run Scripts, the same modifiers.
    (search,) = [o for o in by_type["alfred.workflow.input.scriptfilter"]
                 if o["config"]["keyword"] == "{var:keyword}"]
    assert plist["connections"][related["uid"]] == plist["connections"][search["uid"]]
    keywords = {c["variable"]: c["config"]["default"]
                for c in plist["userconfigurationconfig"]}
    assert keywords == {"keyword": "n", "related_keyword": "nr"}


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
def test_the_related_script_filter_runs_the_recorded_installation(daemon, home, tmp_path,
                                                                  notes_dir):
    from launcher_helpers import alfred_env, installation, runs

    plist, wf = built_plist(tmp_path)
    inst = installation(tmp_path / "venv" / "bin", home)
    (related,) = [o for o in plist["objects"] if o["type"].endswith("scriptfilter")
                  and o["config"]["keyword"] == "{var:related_keyword}"]
    path = str(notes_dir / "kitchen/banana-bread.md")
    for arg, first in (("ripe bananas and butter", "notes:kitchen/banana-bread.md"),
                       ("", None), (path, None)):
        out = subprocess.run(["zsh", "-c", related["config"]["script"], "zsh", arg],
                             cwd=wf, env=alfred_env(plist, HOME=str(tmp_path)),
                             capture_output=True, timeout=60)
        assert out.returncode == 0, out.stderr
        items = json.loads(out.stdout)["items"]
        if first:
            assert items[0]["uid"] == first
        elif arg:
            assert items and "notes:kitchen/banana-bread.md" not in [
                i.get("uid") for i in items]
        else:
            assert items[0]["title"] == "Nothing selected"
    assert runs(inst)[0] == "alfred related ripe bananas and butter"
