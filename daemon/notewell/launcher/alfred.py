"""Alfred Script Filter output: hits, tags, notices and new-note items for Alfred.

The daemon renders result lists here and sends the finished JSON, so the per-keystroke
client only copies bytes to stdout. The JSON itself (the document, message items, the
encoding) is written once, by ``wire.alfred_json``, which the client's own messages
(``wire.messages``: daemon down, warming up) use too.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from typing import TYPE_CHECKING

from notewell.notes import ATTACHMENT_MARK, MAX_PASSAGE_CHARS, MAX_TITLE_CHARS, cut
from notewell.wire import alfred_json
from notewell.wire.alfred_json import message_item

# The writer's output, from json's C encoder: the same bytes as ``alfred_json.dumps``
# (tests/test_alfred_json.py), a few times faster on a list of results.
JSON_DUMPS = functools.partial(json.dumps, ensure_ascii=False, separators=(",", ":"))

if TYPE_CHECKING:
    from notewell.notes import Hit

ICONS = {"bear": "icons/bear.png", "obsidian": "icons/obsidian.png",
         "markdown": "icons/markdown.png"}


# One item's text at most (the passage goes into four fields): 50 items, the most a reply
# holds (``wire.requests.MAX_LIMIT``), stay near 1 MB, far under the 16 MiB frame limit.
SNIPPET_CHARS = 300
HEADING_CHARS = 300


def bounded(hit: Hit) -> Hit:
    """``hit`` with each field within the item's bounds, whatever the index holds (the
    hit itself when it is: a copy costs more than the rest of its item)."""
    if (len(hit.title) <= MAX_TITLE_CHARS and len(hit.snippet) <= SNIPPET_CHARS
            and len(hit.heading_path) <= HEADING_CHARS
            and len(hit.passage) <= MAX_PASSAGE_CHARS):
        return hit
    return dataclasses.replace(
        hit, title=cut(hit.title, MAX_TITLE_CHARS), snippet=cut(hit.snippet, SNIPPET_CHARS),
        heading_path=cut(hit.heading_path, HEADING_CHARS),
        passage=cut(hit.passage, MAX_PASSAGE_CHARS))


# Alfred shows a subtitle's first 70-90 characters: one cut at the first matched word
# keeps this much before it.
SUBTITLE_LEAD = 24


def around_match(snippet: str, spans: list, lead: int = SUBTITLE_LEAD) -> str:
    """``snippet`` from a few words before its first matched word (``spans``), "…" in
    front of what was cut; as it is when the match is near its start or there is none."""
    if not spans or spans[0][0] <= lead:
        return snippet
    start = int(spans[0][0])
    space = snippet.find(" ", start - lead, start)
    return "…" + snippet[space + 1 if space >= 0 else start:]


def hit_item(hit: Hit, query: str = "", dated: bool = False,
             preview: str | None = None) -> dict:
    """One hit as an item; ``preview``: its Quick Look page (``launcher.quicklook``)."""
    hit = bounded(hit)
    location = hit.heading_path or os.path.basename(hit.path or "") or hit.source
    if hit.attachment:
        # "📎 scan.png" alone would not say where the words were found.
        location = "From attachment " + location.removeprefix(ATTACHMENT_MARK)
    if dated and hit.modified is not None:
        # A date filter is on: when each note was last changed is what the user weighs.
        location = time.strftime("%Y-%m-%d", time.localtime(hit.modified)) + " · " + location
    shown = around_match(hit.snippet, hit.snippet_spans)
    subtitle = f"{location} · {shown}" if shown else location
    if hit.archived:
        subtitle = "[archived] " + subtitle
    link = f"[{hit.title}]({hit.url})"
    reveal = hit.path or hit.url
    item: dict = {
        "uid": hit.note_id,
        "title": hit.title,
        "subtitle": subtitle,
        "arg": hit.url,
        "autocomplete": hit.title,
        "text": {"copy": hit.passage, "largetype": hit.passage},
        "icon": {"path": ICONS.get(hit.kind, ICONS["markdown"])},
        "variables": _mod_vars("open", hit, query),
        "mods": {
            "cmd": {"arg": reveal, "subtitle": "Reveal in Finder" if hit.path
                    else "Open in " + hit.kind.title(),
                    "variables": _mod_vars("reveal" if hit.path else "open", hit, query)},
            "alt": {"arg": hit.passage, "subtitle": "Copy passage: " + hit.snippet[:80],
                    "variables": _mod_vars("copy", hit, query)},
            "ctrl": {"arg": link, "subtitle": "Copy Markdown link " + link[:80],
                     "variables": _mod_vars("copy", hit, query)},
            # Quick Look needs a file; a Bear note's passage is previewed from a temp file.
            "shift": {"arg": hit.path or hit.passage,
                      "subtitle": "Quick Look the file" if hit.path
                      else "Quick Look the passage",
                      "variables": _mod_vars("quicklook" if hit.path else "preview", hit,
                                             query)},
            "fn": {"arg": f"similar:{hit.note_id}", "subtitle": "Show notes similar to this one",
                   "variables": _mod_vars("similar", hit, query)},
        },
    }
    # Universal Actions, file actions and drag and drop take ``action``, not ``arg`` (a
    # file:// URL there would be handled as a URL): the file when there is one, else the
    # note's URL (Bear).
    if preview or hit.path:
        item["quicklookurl"] = preview or hit.path
    if hit.path:
        item["type"] = "file:skipcheck"
        item["action"] = {"file": hit.path}
    else:
        item["action"] = {"url": hit.url}
    return item


def _mod_vars(action: str, hit: Hit, query: str) -> dict:
    # A modifier's variables replace the item's in Alfred, so each carries the note and the
    # query it was rendered for: the action checks them against the newest query typed.
    return {"action": action, "note_id": hit.note_id, "query": query}


def feedback(items: list[dict], *, rerun: float | None = None,
             variables: dict | None = None) -> str:
    return alfred_json.feedback(items, rerun=rerun, variables=variables, dumps=JSON_DUMPS)


APP_NAMES = {"bear": "Bear", "obsidian": "Obsidian", "markdown": "your editor"}


def new_note_item(new: dict, query: str, found: bool) -> dict:
    """"New note: TITLE", created by the source's own app through its URL scheme
    (``ReadView.new_notes``); Enter goes through the stale-Enter guard like a hit."""
    app = APP_NAMES.get(new["kind"], new["kind"])
    tags = " ".join("#" + t for t in new.get("tags", []))
    where = f"in {app}" + (f" ({new['source']})" if new["kind"] != "bear" else "")
    subtitle = (f"Create it {where}" + (f" tagged {tags}" if tags else "")
                + ("" if found else " · no notes match"))
    return {"uid": f"new-note:{new['source']}", "title": f"New note: {new['title']}",
            "subtitle": subtitle, "arg": new["url"],
            "icon": {"path": ICONS.get(new["kind"], ICONS["markdown"])},
            "variables": {"action": "create", "note_id": "", "query": query}}


FILTER_HELP = "Filters: #tag and in:source · remove them to search everything"
DATE_FILTERS = ("after:", "before:", "since:", "created:")


def tag_item(tag: dict) -> dict:
    """One tag while a tag is typed: Tab completes it (``#work/`` when tags are nested
    under it, else ``#work `` ), Enter searches it."""
    name, count = tag["tag"], int(tag["notes"])
    nested = tag.get("nested")
    return {"uid": f"tag:{name}", "title": f"#{name}",
            "subtitle": f"{count} note{'s' if count != 1 else ''} · Enter searches "
                        f"#{name}" + (" · Tab goes into its nested tags" if nested else ""),
            "arg": f"#{name} ", "autocomplete": f"#{name}/" if nested else f"#{name} ",
            "icon": {"path": "icon.png"}, "variables": {"action": "search"}}


def tags_feedback(tags: list[dict], query: str) -> str:
    return feedback([tag_item(t) for t in tags], variables={"query": query})


def notice_item(notice: str) -> dict:
    """A notice above the results; one about a date filter shows the accepted forms."""
    head, sep, forms = notice.partition("; use ")
    if sep and notice.lower().startswith(DATE_FILTERS):
        return message_item(head, "Use " + forms)
    if notice.lower().startswith(DATE_FILTERS):
        return message_item(notice, "Dates: after:2025-03-01 · before:2025-06 · since:7d "
                            "(2w, 3m, 1y) · created:2025")
    return message_item(notice, FILTER_HELP)


def results_feedback(hits: list[Hit], notices: list[str], query: str,
                     lag: dict | None = None, *, rebuilding: dict | None = None,
                     new_notes: list[dict] | None = None, dated: bool = False,
                     previews: list[str | None] | None = None) -> str:
    """``previews``: each hit's Quick Look page (``quicklook.write_previews``)."""
    items = [notice_item(n) for n in notices]
    items += [hit_item(h, query, dated, previews[i] if previews else None)
              for i, h in enumerate(hits)]
    if not items and not rebuilding and not new_notes:
        items = [message_item(f"No notes match “{query}”",
                              "Try other words, or fewer of them")]
    # Always last: when nothing fits, creating the note is one Enter away.
    items += [new_note_item(n, query, bool(hits)) for n in new_notes or []]
    if lag:
        items.insert(0, behind_item(lag))
    if rebuilding:
        # Alfred re-runs the query every second, so results fill in as the index does.
        items.insert(0, rebuilding_item(rebuilding))
        return feedback(items, rerun=1.0, variables={"query": query})
    return feedback(items, variables={"query": query})


def rebuilding_item(rebuilding: dict) -> dict:
    """The item above results while a damaged index is rebuilt (``Daemon.rebuilding``)."""
    notes = int(rebuilding.get("notes", 0))
    return message_item("notewell is rebuilding its index…",
                        f"The old one was damaged and kept aside; {notes} notes indexed "
                        "so far, results may be incomplete")


def behind_item(lag: dict) -> dict:
    """The hint above results when the index lags its sources (see ``Background.lag``)."""
    minutes = max(1, int(lag.get("minutes", 0)))
    title = f"Index is {minutes} minute{'s' if minutes != 1 else ''} behind"
    error = lag.get("error")
    if error:
        name, message = error
        subtitle = f"Syncing {name} keeps failing: {message}"
    else:
        subtitle = (f"Changes in {', '.join(lag.get('sources', []))} are not indexed yet; "
                    "results may miss recent edits")
    return message_item(title, subtitle[:300])


def related_feedback(hits: list[Hit], notices: list[str]) -> str:
    """Related notes for a selection or a file (the Universal Action and the Hotkey).
    Their items carry no query: no keystroke made them, so the stale-Enter guard, which
    compares an item's query with the newest one typed, lets them act."""
    items = [message_item(n[:1].upper() + n[1:], "Select less text to choose what is "
                          "read" if n.startswith("only the first") else "")
             for n in notices]
    for hit in hits:
        item = hit_item(hit)
        for variables in [item["variables"], *(m["variables"] for m in item["mods"].values())]:
            variables.pop("query", None)
        items.append(item)
    if not hits:
        items.append(message_item("No related notes", "No note is near this text in "
                                  "meaning (or within the filters)"))
    return feedback(items)
