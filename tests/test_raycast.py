"""The Raycast extension: it installs from its lockfile, type-checks and builds with
Raycast's own toolchain (`ray build`), and its socket client finds and talks to a real
daemon. Needs npm (and the npm registry, or npm's cache, for `npm ci`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, start_daemon, subprocess_env, wait_synced
from notewell import config
from notewell.launcher import alfred
from notewell.wire import paths

EXT = REPO / "workflow" / "raycast"

# `npm ci` fetches packages and writes node_modules: with the installs (make test-install).
pytestmark = [pytest.mark.install,
              pytest.mark.skipif(shutil.which("npm") is None,
                                 reason="npm is not on PATH: the Raycast extension needs Node")]


def npm(*args: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    out = subprocess.run(["npm", *args], cwd=EXT, capture_output=True, text=True,
                         timeout=timeout, env=env)
    assert out.returncode == 0, f"npm {' '.join(args)}:\n{out.stdout[-3000:]}{out.stderr[-3000:]}"
    return out


def npx(*args: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    out = subprocess.run(["npx", "--no-install", *args], cwd=EXT, capture_output=True,
                         text=True, timeout=timeout, env=env)
    assert out.returncode == 0, f"npx {' '.join(args)}:\n{out.stdout[-3000:]}{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def installed() -> Path:
    """`npm ci`: exactly the locked versions (fails if package.json and the lock differ)."""
    npm("ci", "--no-audit", "--no-fund", "--prefer-offline")
    assert (EXT / "node_modules" / "@raycast" / "api" / "package.json").exists()
    return EXT


@pytest.fixture(scope="module")
def probe(installed: Path, tmp_path_factory) -> Path:
    """The extension's daemon client bundled with esbuild into a node script."""
    out = tmp_path_factory.mktemp("probe") / "probe.js"
    npx("esbuild", "scripts/probe.ts", "--bundle", "--platform=node", f"--outfile={out}",
        "--log-level=warning")
    return out


def test_manifest_is_a_raycast_extension():
    pkg = json.loads((EXT / "package.json").read_text())
    for key in ("name", "title", "description", "icon", "author", "categories", "license",
                "commands"):
        assert pkg.get(key), key
    assert [c["name"] for c in pkg["commands"]] == ["search-notes", "related-notes"]
    for command in pkg["commands"]:
        assert command["mode"] == "view"
        assert (EXT / "src" / f"{command['name']}.tsx").exists()
    assert (EXT / "assets" / pkg["icon"]).exists()
    assert pkg["dependencies"]["@raycast/api"]
    assert pkg["platforms"] == ["macOS"]  # it opens Finder, Quick Look, Bear: macOS only
    lock = json.loads((EXT / "package-lock.json").read_text())
    assert lock["packages"][""]["dependencies"] == pkg["dependencies"]
    source = (EXT / "src" / "search-notes.tsx").read_text()
    for action in ("Action.Open", "Action.ShowInFinder", 'title="Copy Passage"',
                   'title="Copy Link"', "Action.ToggleQuickLook", 'title="Similar Notes"',
                   "List.Item.Detail", "List.EmptyView", "throttle"):
        assert action in source, action


def test_typecheck_and_ray_build(installed: Path, tmp_path: Path):
    npx("tsc", "--noEmit")
    dist = EXT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    # ray build also creates ~/.config/raycast; keep that out of the real home.
    env = dict(os.environ, HOME=str(tmp_path))
    out = npx("ray", "build", "-e", "dist", "-o", "dist", "--non-interactive",
              "--exit-on-error", env=env)
    assert "built extension successfully" in out.stdout + out.stderr
    assert (dist / "search-notes.js").stat().st_size > 1000
    built = json.loads((dist / "package.json").read_text())
    assert built["name"] == "notewell"
    for name in ("related-notes.js", "tools/find-notes.js", "tools/read-note.js"):
        assert (dist / name).stat().st_size > 1000, name
    # ai.yaml, as ray build read it: instructions, and evals calling only declared tools.
    tools = {t["name"] for t in built["tools"]}
    assert len(built["ai"]["instructions"]) > 200 and len(built["ai"]["evals"]) >= 3
    for case in built["ai"]["evals"]:
        assert case["input"].startswith("@notewell ")
        assert set(case.get("mocks", {})) <= tools
        called = [e["callsTool"]["name"] for e in case["expected"] if "callsTool" in e]
        assert called and set(called) <= tools
    for icon in ("icon.png", "bear.png", "obsidian.png", "markdown.png"):
        assert (dist / "assets" / icon).exists()


def test_a_type_error_fails_the_build(installed: Path, tmp_path: Path):
    """tsc really checks the sources (a broken copy does not pass)."""
    broken = tmp_path / "ext"
    shutil.copytree(EXT, broken, ignore=shutil.ignore_patterns("node_modules", "dist"),
                    symlinks=True)
    (broken / "node_modules").symlink_to(EXT / "node_modules")
    src = broken / "src" / "daemon.ts"
    src.write_text(src.read_text().replace("note_id: string;", "note_id: number;"))
    out = subprocess.run(["npx", "--no-install", "tsc", "--noEmit"], cwd=broken,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode != 0 and "search-notes.tsx" in out.stdout


def node(probe: Path, *args: str, env: dict[str, str]) -> dict:
    out = subprocess.run(["node", str(probe), *args], capture_output=True, text=True,
                         timeout=30, env=env)
    return json.loads(out.stdout)


@pytest.mark.parametrize("case", ["short", "long", "xdg"])
def test_socket_path_matches_the_daemons(probe: Path, tmp_path: Path, monkeypatch, case):
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    if case == "short":
        base["NOTEWELL_HOME"] = str(tmp_path / "h")
    elif case == "long":
        base["NOTEWELL_HOME"] = str(tmp_path / ("d" * 90) / "notewell home")
    else:
        base["XDG_RUNTIME_DIR"] = str(tmp_path / "run")
        base["XDG_DATA_HOME"] = str(tmp_path / "data")
    for key in ("NOTEWELL_HOME", "XDG_RUNTIME_DIR", "XDG_DATA_HOME"):
        monkeypatch.delenv(key, raising=False)
    for key, value in base.items():
        monkeypatch.setenv(key, value)
    got = node(probe, "socket-path", env=base)
    assert got == {"home": paths.home(), "socket": paths.socket_path()}


def test_search_and_similar_over_the_socket(probe: Path, daemon, home: Path):
    env = subprocess_env(home)
    result = node(probe, "search", "postgres", "vacuum", env=env)
    top = result["hits"][0]
    assert top["title"] == "Postgres vacuum" and top["kind"] == "markdown"
    assert top["path"].endswith("postgres-vacuum.md") and top["passage"]
    assert set(top) >= {"note_id", "url", "tags", "heading_path", "snippet", "score"}
    assert [top["passage"][a:b] for a, b in top["spans"]] == ["VACUUM"]
    assert top["passages"][0]["text"] == top["passage"]
    assert node(probe, "search", "#nosuchtag", env=env)["notices"]
    similar = node(probe, "similar", top["note_id"], env=env)
    assert similar["hits"] and top["note_id"] not in [h["note_id"] for h in similar["hits"]]


def test_daemon_down_is_reported_as_down(probe: Path, home: Path):
    assert node(probe, "search", "x", env=subprocess_env(home))["error"] == "down"


def test_the_extension_finds_the_notewell_that_last_ran_with_its_home(probe: Path, home: Path):
    """Like the Alfred workflow, which has the paths filled in when it is built: an installed
    notewell records its command in its home, and the extension starts the daemon with it."""
    from notewell.ops import login_agent as agent

    env = subprocess_env(home)
    assert node(probe, "command", env=env) == []
    subprocess.run([sys.executable, "-m", "notewell", "alfred", "build"], env=env,
                   capture_output=True, timeout=60, check=True)
    assert node(probe, "command", env=env) == agent.program()[:-1]
    assert node(probe, "command", "/opt/nw/bin/notewell", env=env) == ["/opt/nw/bin/notewell"]


def test_search_reply_keeps_what_the_view_shows(probe: Path, tmp_path: Path, home: Path,
                                                notes_dir: Path):
    """Tag completions while "#rec" is typed, "New note" (a source with an editor link),
    notices: the extension's search keeps every field of the daemon's reply it shows."""
    config.save(config.Config(sources=(config.SourceConfig(
        "notes", "markdown", str(notes_dir), ("private/**",),
        {"new_note_url": "myeditor://new?title={title}&tags={tags}"}),)))
    d = start_daemon(home)
    try:
        wait_synced(d)
        env = subprocess_env(home)
        tags = node(probe, "search", "#rec", env=env)
        assert {"tag": "recipes", "notes": 1, "nested": False} in tags["tags"]
        found = node(probe, "search", "banana bread #baking", env=env)
        assert found["hits"] and found["new_note"] == [{
            "source": "notes", "kind": "markdown", "title": "banana bread",
            "tags": ["baking"], "url": "myeditor://new?title=banana%20bread&tags=baking"}]
        assert node(probe, "search", "#nosuchtag words", env=env)["notices"]
    finally:
        d.stop()


def alfred_lines(reply: dict) -> list[dict]:
    """What the Alfred renderer shows for the same extras, as (title, subtitle) lines."""
    items = []
    if reply.get("rebuilding"):
        items.append(alfred.rebuilding_item(reply["rebuilding"]))
    if reply.get("behind"):
        items.append(alfred.behind_item(reply["behind"]))
    items += [alfred.notice_item(n) for n in reply.get("notices", [])]
    items += [alfred.tag_item(t) for t in reply.get("tags", [])]
    items += [alfred.new_note_item(n, reply.get("query", ""), bool(reply.get("hits")))
              for n in reply.get("new_note", [])]
    # Alfred goes into nested tags with Tab; Raycast with its second action, ⌘↩.
    return [{"title": i["title"], "subtitle": i["subtitle"].replace("Tab goes", "⌘↩ goes")}
            for i in items]


@pytest.mark.parametrize("reply", [
    {"hits": [], "notices": ["No notes are tagged #x.", "after:someday is not a date; use "
                             "after:2025-03-01 or after:7d", "before:2030 is in the future"]},
    {"hits": [], "notices": [], "tags": [{"tag": "work", "notes": 3, "nested": True},
                                         {"tag": "recipes", "notes": 1, "nested": False}]},
    {"hits": [{}], "notices": [], "new_note": [
        {"source": "notes", "kind": "markdown", "title": "pie", "tags": ["baking", "x"],
         "url": "e://n"},
        {"source": "bear", "kind": "bear", "title": "pie", "tags": [], "url": "bear://n"},
        {"source": "vault", "kind": "obsidian", "title": "pie", "tags": [], "url": "o://n"}]},
    {"hits": [], "notices": [], "new_note": [
        {"source": "notes", "kind": "markdown", "title": "pie", "tags": [], "url": "e://n"}]},
    {"hits": [], "notices": [], "behind": {"minutes": 1, "sources": ["notes", "bear"],
                                           "error": None}},
    {"hits": [], "notices": [], "behind": {"minutes": 7, "sources": ["bear"],
                                           "error": ["bear", "database is locked"]}},
    {"hits": [], "notices": [], "rebuilding": {"notes": 120}},
], ids=["notices", "tags", "new-notes", "new-note-no-hits", "behind", "behind-error",
        "rebuilding"])
def test_the_extension_words_the_extras_as_alfred_does(probe: Path, reply: dict):
    got = node(probe, "wording", json.dumps(reply), env={"PATH": os.environ["PATH"]})
    assert got == alfred_lines(reply)


# -- the AI tools (issue 35.2) and Related Notes to Selected Text -----------------------------


def test_ai_tools_are_declared_as_raycast_documents_them():
    pkg = json.loads((EXT / "package.json").read_text())
    assert [t["name"] for t in pkg["tools"]] == ["find-notes", "read-note"]
    for tool in pkg["tools"]:
        assert tool["title"] and len(tool["description"]) > 100, tool["name"]
        source = (EXT / "src" / "tools" / f"{tool['name']}.ts").read_text()
        # One typed input object, a default async function, descriptions for the model.
        assert "type Input = {" in source and "/**" in source
        assert "export default async function tool(input: Input)" in source
    assert (EXT / "ai.yaml").exists()


@pytest.fixture(scope="module")
def tools_probe(installed: Path, tmp_path_factory) -> Path:
    """The AI tools' own files bundled with a stand-in for the two @raycast/api calls."""
    out = tmp_path_factory.mktemp("tools") / "tools-probe.js"
    npx("esbuild", "scripts/tools-probe.ts", "--bundle", "--platform=node",
        "--alias:@raycast/api=./scripts/raycast-stand-in.ts", f"--outfile={out}",
        "--log-level=warning")
    return out


LONG_NOTE = "# Manual\n\n" + "".join(f"Line {i}: the pump's manual says to bleed it.\n"
                                       for i in range(1200))


def test_the_ai_tools_answer_from_a_real_daemon(tools_probe: Path, home: Path,
                                               tmp_path: Path):
    from helpers import NOTES, write_notes

    notes = write_notes(tmp_path / "notes", {**NOTES, "long/manual.md": LONG_NOTE})
    config.save(config.Config(sources=(config.SourceConfig("notes", "markdown",
                                                           str(notes)),)))
    env = subprocess_env(home)
    down = node(tools_probe, "find-notes", json.dumps({"query": "postgres"}), env=env)
    assert "notewell agent start" in down["error"]
    d = start_daemon(home)
    try:
        wait_synced(d)

        def tool(name: str, **args) -> dict:
            return node(tools_probe, name, json.dumps(args), env=env)

        found = tool("find-notes", query="postgres vacuum")
        top = found["notes"][0]
        assert top["title"] == "Postgres vacuum" and top["noteId"] == "notes:db/postgres-vacuum.md"
        assert set(top) == {"noteId", "title", "source", "section", "snippet", "tags",
                            "modified", "url"}
        assert len(top["modified"]) == 10 and "postgres" in top["tags"]
        tagged = tool("find-notes", query="notes", tags=["postgres"])["notes"]
        assert [n["noteId"] for n in tagged] == ["notes:db/postgres-vacuum.md"]
        assert tool("find-notes", query="vacuum", source="nowhere")["notes"] == []
        assert tool("find-notes", query="vacuum", modifiedBefore="2000-01-01")["notes"] == []
        assert "cannot read 'someday'" in tool("find-notes", query="x",
                                                modifiedAfter="someday")["error"]
        assert tool("find-notes", query="  ")["error"].startswith("query:")
        page = tool("read-note", noteId=top["noteId"])
        assert "VACUUM ANALYZE" in page["text"] and page["nextPage"] is None
        first = tool("read-note", noteId="notes:long/manual.md")
        second = tool("read-note", noteId="notes:long/manual.md", page=first["nextPage"])
        assert first["nextPage"] == len(first["text"]) and second["text"] != first["text"]
        assert (first["text"] + second["text"]).startswith(LONG_NOTE[:len(first["text"])
                                                                     + 100])
        assert "no note with id" in tool("read-note", noteId="notes:nope.md")["error"]
        related = node(tools_probe, "related", "ripe bananas, flour and butter", env=env)
        assert related["hits"][0]["note_id"] == "notes:kitchen/banana-bread.md"
    finally:
        d.stop()


def test_related_notes_reads_the_selection_else_the_clipboard(tools_probe: Path):
    env = {"PATH": os.environ["PATH"]}
    assert node(tools_probe, "choose", "picked", "copied", env=env) == {
        "text": "picked", "from": "selection"}
    assert node(tools_probe, "choose", " \n", "copied", env=env) == {
        "text": "copied", "from": "clipboard"}
    assert node(tools_probe, "choose", "", " ", env=env) is None
    source = (EXT / "src" / "related-notes.tsx").read_text()
    for needed in ("getSelectedText()", "Clipboard.readText()",
                   "No text selected, and none on the clipboard"):
        assert needed in source, needed
def test_the_detail_pane_bolds_the_matched_words_and_escapes_the_note(probe: Path):
    """Issue 35.3: the passage with the spans in bold, the note's Markdown shown as written
    (escaped), offsets in code points (an emoji before the word), and the note's next
    passages under it."""
    text = "🙂 Run *VACUUM* now\n- [x] done"
    hit = {"title": "Postgres #1", "passage": text, "heading_path": "Ops", "score": 1,
           "spans": [[7, 13]],
           "passages": [{"text": text, "heading_path": "Ops", "spans": [[7, 13]], "score": 1},
                        {"text": "vacuum again", "heading_path": "Later", "spans": [[0, 6]],
                         "score": 0.5}]}
    got = node(probe, "detail", json.dumps(hit), env={"PATH": os.environ["PATH"]})
    assert got == ("## Postgres \\#1\n\n🙂 Run \\***VACUUM**\\* now  \n\\- \\[x\\] done"
                   "\n\n---\n\n_Later_\n\n**vacuum** again")
    # An older daemon's hit (no spans, no passages): the passage, escaped, nothing bold.
    old = {"title": "T", "passage": "a_b", "heading_path": "", "score": 1}
    assert node(probe, "detail", json.dumps(old), env={"PATH": os.environ["PATH"]}) == (
        "## T\n\na\\_b")
