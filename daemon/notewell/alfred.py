"""Alfred Script Filter output, written once: hits and messages to Alfred's JSON.

The daemon renders result lists here and sends the finished JSON, so the per-keystroke
client only copies bytes to stdout. Messages (daemon down, warming up) are rendered by the
client itself with ``message_feedback``, which imports nothing: ``json`` alone costs the
client more than its whole interpreter start.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .notes import Hit

ICONS = {"bear": "icons/bear.png", "obsidian": "icons/obsidian.png",
         "markdown": "icons/markdown.png"}
MOD_HINT = "⌘ reveal · ⌥ copy passage · ⌃ copy link · fn similar"


def hit_item(hit: Hit, query: str = "") -> dict:
    location = hit.heading_path or os.path.basename(hit.path or "") or hit.source
    subtitle = f"{location} · {hit.snippet}" if hit.snippet else location
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
        "variables": {"action": "open", "note_id": hit.note_id, "query": query},
        "mods": {
            "cmd": {"arg": reveal, "subtitle": "Reveal in Finder" if hit.path
                    else "Open in " + hit.kind.title(),
                    "variables": {"action": "reveal" if hit.path else "open"}},
            "alt": {"arg": hit.passage, "subtitle": "Copy passage: " + hit.snippet[:80],
                    "variables": {"action": "copy"}},
            "ctrl": {"arg": link, "subtitle": "Copy Markdown link " + link[:80],
                     "variables": {"action": "copy"}},
            "fn": {"arg": f"similar:{hit.note_id}", "subtitle": "Show notes similar to this one",
                   "variables": {"action": "similar"}},
        },
    }
    if hit.path:
        item["quicklookurl"] = hit.path
        item["type"] = "file:skipcheck"
    return item


def message_item(title: str, subtitle: str = "", *, arg: str | None = None,
                 action: str | None = None) -> dict:
    item: dict = {"title": title, "subtitle": subtitle, "valid": arg is not None,
                  "icon": {"path": "icon.png"}}
    if arg is not None:
        item["arg"] = arg
    if action:
        item["variables"] = {"action": action}
    return item


def feedback(items: list[dict], *, rerun: float | None = None,
             variables: dict | None = None) -> str:
    import json

    doc: dict = {"skipknowledge": True, "items": items}
    if rerun is not None:
        doc["rerun"] = rerun
    if variables:
        doc["variables"] = variables
    return json.dumps(doc, ensure_ascii=False)


def results_feedback(hits: list[Hit], notices: list[str], query: str) -> str:
    items = [message_item(n, "Filters: #tag and in:source · remove them to search everything")
             for n in notices]
    items += [hit_item(h, query) for h in hits]
    if not items:
        items = [message_item(f"No notes match “{query}”",
                              "Try other words, or fewer of them")]
    return feedback(items, variables={"query": query})


def message_feedback(title: str, subtitle: str = "", *, arg: str | None = None,
                     action: str | None = None, rerun: float | None = None) -> str:
    """One message item as Alfred JSON, without importing ``json`` (client hot path)."""
    parts = [f'"title":{_q(title)}', f'"subtitle":{_q(subtitle)}',
             f'"valid":{"true" if arg is not None else "false"}',
             '"icon":{"path":"icon.png"}']
    if arg is not None:
        parts.append(f'"arg":{_q(arg)}')
    if action:
        parts.append(f'"variables":{{"action":{_q(action)}}}')
    head = '{"skipknowledge":true,'
    if rerun is not None:
        head += f'"rerun":{rerun},'
    return head + '"items":[{' + ",".join(parts) + "}]}"


def _q(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
