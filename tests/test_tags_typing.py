"""Tags as you type: a query that is only ``#`` or ``#wor`` lists the matching tags with
their note counts, most used first; Tab completes, Enter searches the tag."""

from __future__ import annotations

import json
import subprocess

from notewell.launcher import alfred, alfred_actions
from notewell.search.query import typing_tag


def test_only_a_tag_being_typed_counts():
    assert typing_tag("#") == "" and typing_tag("  #Wor") == "wor"
    assert typing_tag("#work/pro") == "work/pro"
    for other in ("#work ", "#work vacuum", "vacuum #wo", "", "in:notes"):
        assert typing_tag(other) is None


def test_engine_lists_tags_most_used_first_with_nesting(engine, notes_dir):
    (notes_dir / "db" / "pg-backup.md").write_text(
        "---\ntags: [db/backup, postgres]\n---\n# Backups\n\npg_dump nightly.\n")
    engine.sync()
    with engine.reading() as view:
        found = view.tag_completions("#")
    assert found[0] == {"tag": "db", "notes": 2, "nested": True}
    assert {"tag": "postgres", "notes": 2, "nested": False} in found
    counts = [t["notes"] for t in found]
    assert counts == sorted(counts, reverse=True)
    with engine.reading() as view:
        assert [t["tag"] for t in view.tag_completions("#db/")] == ["db/backup",
                                                                      "db/maintenance"]
        assert view.tag_completions("#zzz") is None  # no such tag: the search says so
        assert view.tag_completions("#db ") is None  # finished: a search for the tag


def test_tag_items_complete_with_tab_and_search_with_enter():
    doc = json.loads(alfred.tags_feedback(
        [{"tag": "work", "notes": 12, "nested": True},
         {"tag": "work/apollo", "notes": 1, "nested": False}], "#wo"))
    nested, leaf = doc["items"]
    assert nested["title"] == "#work" and "12 notes" in nested["subtitle"]
    assert nested["autocomplete"] == "#work/" and nested["arg"] == "#work "
    assert leaf["autocomplete"] == "#work/apollo " and "1 note " in leaf["subtitle"]
    assert nested["variables"] == {"action": "search"}
    calls = []
    alfred_actions.handle(["open", "#work "], {"action": "search"},
                          lambda cmd, **kw: calls.append(cmd) or
                          subprocess.CompletedProcess(cmd, 0, "", ""))
    assert calls[0][0] == "osascript" and calls[0][-1] == "#work "


def test_daemon_answers_a_typed_tag_with_the_tags(daemon):
    reply = daemon.ask("search", query="#re", format="json")
    assert reply["ok"], reply
    assert reply["result"]["tags"] == [{"tag": "recipes", "notes": 1, "nested": False}]
    assert reply["result"]["hits"] == []
    alfred_reply = daemon.ask("search", query="#", format="alfred")
    items = json.loads(alfred_reply["result"]["alfred"])["items"]
    assert {i["title"] for i in items} >= {"#db", "#postgres", "#recipes", "#travel"}
    # A finished tag is a search for its notes.
    done = daemon.ask("search", query="#recipes ", format="json")["result"]
    assert [h["note_id"] for h in done["hits"]] == ["notes:kitchen/banana-bread.md"]
