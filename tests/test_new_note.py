"""A new note from a search: the "New note: QUERY" item, made through each source's own
app (Bear's create, Obsidian's new, a configured editor template); notewell writes
nothing itself."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from notewell import config
from notewell.config import SourceConfig
from notewell.engine import Engine
from notewell.launcher import alfred, alfred_actions
from notewell.sources.bear import BearSource
from notewell.sources.markdown import MarkdownSource
from notewell.sources.obsidian import ObsidianSource


def test_bear_create_url_carries_title_and_tags():
    src = BearSource(SourceConfig("bear", "bear"))
    assert src.new_note_url("Pancake ideas & more", ("recipes/breakfast", "todo")) == (
        "bear://x-callback-url/create?title=Pancake%20ideas%20%26%20more"
        "&tags=recipes%2Fbreakfast%2Ctodo")
    assert src.new_note_url("  ") is None


def test_obsidian_new_url_names_the_vault(tmp_path):
    vault = tmp_path / "My Vault"
    (vault / ".obsidian").mkdir(parents=True)
    src = ObsidianSource(SourceConfig("vault", "obsidian", str(vault)))
    assert src.new_note_url("Trip to Porto") == (
        "obsidian://new?vault=My%20Vault&name=Trip%20to%20Porto")
    # A slash would make a folder: it becomes a dash. Tags go in as the first line.
    assert src.new_note_url("a/b", ("travel",)).endswith("&name=a-b&content=%23travel")


def test_markdown_folder_needs_an_editor_template(tmp_path):
    plain = MarkdownSource(SourceConfig("notes", "markdown", str(tmp_path)))
    assert plain.new_note_url("Anything") is None
    editor = MarkdownSource(SourceConfig(
        "notes", "markdown", str(tmp_path), (),
        {"new_note_url": "myeditor://new?dir={path}&title={title}&tags={tags}"}))
    assert editor.new_note_url("Weekly review", ("work",)) == (
        f"myeditor://new?dir={tmp_path}&title=Weekly%20review&tags=work")


def _engine(tmp_path, home, fake_embedder, *sources) -> Engine:
    cfg = config.Config(sources=sources)
    config.save(cfg)
    return Engine(config.load(), embedder=fake_embedder)


def test_engine_offers_each_source_that_can_create_and_honours_in(tmp_path, home,
                                                                   fake_embedder):
    notes = tmp_path / "notes"
    notes.mkdir()
    vault = tmp_path / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    engine = _engine(tmp_path, home, fake_embedder,
                     SourceConfig("notes", "markdown", str(notes)),
                     SourceConfig("vault", "obsidian", str(vault)),
                     SourceConfig("bear", "bear"))
    try:
        with engine.reading() as view:
            found = view.new_notes("#ideas pancake toppings")
            assert [(n["source"], n["title"], n["tags"]) for n in found] == [
                ("vault", "pancake toppings", ["ideas"]),
                ("bear", "pancake toppings", ["ideas"])]
            assert [n["source"] for n in view.new_notes("in:bear pancakes")] == ["bear"]
            assert view.new_notes("#ideas") == [] and view.new_notes("  ") == []
        # Nothing was written anywhere by asking.
        assert list(notes.iterdir()) == [] and [p.name for p in vault.iterdir()] == [
            ".obsidian"]
    finally:
        engine.close()


NEW = {"source": "bear", "kind": "bear", "title": "pancake toppings", "tags": ["ideas"],
       "url": "bear://x-callback-url/create?title=pancake%20toppings&tags=ideas"}


def test_new_note_item_is_last_and_replaces_the_no_match_message():
    doc = json.loads(alfred.results_feedback([], [], "pancake toppings", new_notes=[NEW]))
    (item,) = doc["items"]
    assert item["title"] == "New note: pancake toppings"
    assert item["arg"] == NEW["url"]
    assert item["variables"] == {"action": "create", "note_id": "", "query": "pancake toppings"}
    assert "Bear" in item["subtitle"] and "#ideas" in item["subtitle"]
    assert "no notes match" in item["subtitle"]
    doc = json.loads(alfred.results_feedback([], [], "zzz"))
    assert doc["items"][0]["title"].startswith("No notes match")


def test_create_runs_the_app_url_and_a_stale_one_shows_alfred_again(home: Path):
    calls = []

    def run(cmd, **kw):
        calls.append(list(cmd))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    env = {"action": "create", "note_id": "", "query": "pancake toppings"}
    alfred_actions.handle(["open", NEW["url"]], env, run, newest=lambda: "pancake toppings")
    assert calls == [["open", NEW["url"]]]
    calls.clear()
    # Typed on since: never create a note named after an older query.
    message = alfred_actions.handle(["open", NEW["url"]], env, run,
                                    newest=lambda: "pancake toppings with syrup")
    assert "stale" in message and calls[0][0] == "osascript"
    assert "open" not in calls[0]
