"""Alfred Script Filter output, field by field."""

from __future__ import annotations

import json

from notewell.launcher import alfred
from notewell.notes import Hit
from notewell.wire import messages


def hit(**over) -> Hit:
    base = dict(note_id="notes:git/undo.md", title="Undo the last commit", source="notes",
                kind="markdown", url="file:///n/git/undo.md", path="/n/git/undo.md",
                tags=["git"], heading_path="Remote branches",
                snippet="Delete a remote branch with git push.",
                passage="Delete a remote branch with git push origin --delete name.",
                score=0.5)
    base.update(over)
    return Hit(**base)


def test_hit_item_fields():
    item = alfred.hit_item(hit(), "del rem")
    assert item["uid"] == "notes:git/undo.md"
    assert item["title"] == "Undo the last commit"
    assert item["subtitle"] == "Remote branches · Delete a remote branch with git push."
    assert item["arg"] == "file:///n/git/undo.md"
    passage = "Delete a remote branch with git push origin --delete name."
    assert item["text"] == {"copy": passage, "largetype": passage}
    assert item["quicklookurl"] == "/n/git/undo.md"
    assert item["icon"] == {"path": "icons/markdown.png"}
    assert item["variables"]["query"] == "del rem"
    assert item["mods"]["cmd"]["arg"] == "/n/git/undo.md"
    assert item["mods"]["cmd"]["variables"]["action"] == "reveal"
    assert item["mods"]["alt"]["arg"] == item["text"]["copy"]
    assert item["mods"]["ctrl"]["arg"] == "[Undo the last commit](file:///n/git/undo.md)"
    assert item["mods"]["fn"]["arg"] == "similar:notes:git/undo.md"


def test_note_without_file_has_no_quicklook_and_cmd_opens():
    item = alfred.hit_item(hit(kind="bear", path=None, url="bear://x-callback-url/open-note?id=A"))
    assert "quicklookurl" not in item
    assert item["mods"]["cmd"]["arg"] == "bear://x-callback-url/open-note?id=A"
    assert item["icon"]["path"] == "icons/bear.png"


def test_file_item_exactly():
    """The whole item, so a field added or dropped shows here. ``action`` hands Universal
    Actions, file actions and drag and drop the file itself; ``arg`` stays the URL."""
    passage = "Delete a remote branch with git push origin --delete name."
    mod_vars = {"note_id": "notes:git/undo.md", "query": "del rem"}
    assert alfred.hit_item(hit(), "del rem") == {
        "uid": "notes:git/undo.md",
        "title": "Undo the last commit",
        "subtitle": "Remote branches · Delete a remote branch with git push.",
        "arg": "file:///n/git/undo.md",
        "autocomplete": "Undo the last commit",
        "text": {"copy": passage, "largetype": passage},
        "icon": {"path": "icons/markdown.png"},
        "variables": {"action": "open", **mod_vars},
        "mods": {
            "cmd": {"arg": "/n/git/undo.md", "subtitle": "Reveal in Finder",
                    "variables": {"action": "reveal", **mod_vars}},
            "alt": {"arg": passage, "subtitle": "Copy passage: Delete a remote branch with "
                    "git push.", "variables": {"action": "copy", **mod_vars}},
            "ctrl": {"arg": "[Undo the last commit](file:///n/git/undo.md)",
                     "subtitle": "Copy Markdown link [Undo the last commit](file:///n/git/"
                     "undo.md)", "variables": {"action": "copy", **mod_vars}},
            "shift": {"arg": "/n/git/undo.md", "subtitle": "Quick Look the file",
                      "variables": {"action": "quicklook", **mod_vars}},
            "fn": {"arg": "similar:notes:git/undo.md",
                   "subtitle": "Show notes similar to this one",
                   "variables": {"action": "similar", **mod_vars}},
        },
        "quicklookurl": "/n/git/undo.md",
        "type": "file:skipcheck",
        "action": {"file": "/n/git/undo.md"},
    }


def test_bear_item_exactly():
    url = "bear://x-callback-url/open-note?id=A"
    item = alfred.hit_item(hit(kind="bear", path=None, url=url, note_id="bear:A",
                               heading_path="", snippet=""), "q")
    mod_vars = {"note_id": "bear:A", "query": "q"}
    passage = "Delete a remote branch with git push origin --delete name."
    assert item == {
        "uid": "bear:A",
        "title": "Undo the last commit",
        "subtitle": "notes",
        "arg": url,
        "autocomplete": "Undo the last commit",
        "text": {"copy": passage, "largetype": passage},
        "icon": {"path": "icons/bear.png"},
        "variables": {"action": "open", **mod_vars},
        "mods": {
            "cmd": {"arg": url, "subtitle": "Open in Bear",
                    "variables": {"action": "open", **mod_vars}},
            "alt": {"arg": passage, "subtitle": "Copy passage: ",
                    "variables": {"action": "copy", **mod_vars}},
            "ctrl": {"arg": f"[Undo the last commit]({url})",
                     "subtitle": f"Copy Markdown link [Undo the last commit]({url})",
                     "variables": {"action": "copy", **mod_vars}},
            "shift": {"arg": passage, "subtitle": "Quick Look the passage",
                      "variables": {"action": "preview", **mod_vars}},
            "fn": {"arg": "similar:bear:A", "subtitle": "Show notes similar to this one",
                   "variables": {"action": "similar", **mod_vars}},
        },
        "action": {"url": url},  # no file: Universal Actions get the note's URL
    }


def test_results_feedback_puts_notices_first_and_never_returns_an_empty_list():
    doc = json.loads(alfred.results_feedback([hit()], ["No notes are tagged #x."], "q"))
    assert doc["skipknowledge"] is True
    assert doc["items"][0]["title"] == "No notes are tagged #x."
    assert doc["items"][0]["valid"] is False
    empty = json.loads(alfred.results_feedback([], [], "zzz"))
    assert len(empty["items"]) == 1 and "zzz" in empty["items"][0]["title"]


def test_message_feedback_is_valid_json_without_the_json_module():
    tricky = 'quote " backslash \\ newline \n tab \t bell \x07 é 🍮'
    doc = json.loads(messages.message_feedback(tricky, tricky, arg="a", action="start", rerun=0.3))
    assert doc["items"][0]["title"] == tricky and doc["items"][0]["subtitle"] == tricky
    assert doc["rerun"] == 0.3 and doc["items"][0]["valid"] is True
    assert doc["items"][0]["variables"] == {"action": "start"}
    assert json.loads(messages.message_feedback("t"))["items"][0]["valid"] is False
