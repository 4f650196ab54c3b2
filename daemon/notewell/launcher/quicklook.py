"""Alfred's Quick Look of a hit: its passage as a small HTML page, the query's words
marked (``<mark>``, from ``Hit.spans``), written by the daemon in its cache folder
(``wire.paths.preview_dir``: under the home, 0700, never beside the notes).

A preview is named by its content: the same hit on the next keystroke finds its file and
writes nothing, and two searches at once never write over each other's previews. Their
number stays bounded: once a write brings the folder over ``MAX_PREVIEWS``, the oldest
go (a file still shown was written or touched by the newest answers).
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import os
from typing import TYPE_CHECKING

from notewell.wire import paths

if TYPE_CHECKING:
    from notewell.notes import Hit

MAX_PREVIEWS = 200  # about ten answers of twenty hits
_STYLE = ("body{font:15px/1.5 -apple-system,system-ui,sans-serif;margin:2em;max-width:46em}"
          "h1{font-size:1.3em;margin:0}p.where{color:#777;margin:.2em 0 1.2em}"
          "div{white-space:pre-wrap}mark{background:#ffe066;color:inherit}")


def page(hit: Hit) -> str:
    """The preview's HTML: title, where in the note, the passage with its spans marked;
    every text of the note escaped."""
    parts, at = [], 0
    for start, end in hit.spans:
        if start < at or end > len(hit.passage):
            continue  # spans are sorted and disjoint; anything else is not shown
        parts.append(html.escape(hit.passage[at:start]))
        parts.append("<mark>" + html.escape(hit.passage[start:end]) + "</mark>")
        at = end
    parts.append(html.escape(hit.passage[at:]))
    where = " · ".join(p for p in (hit.source, hit.heading_path) if p)
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>'
            f"{html.escape(hit.title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{html.escape(hit.title)}</h1><p class=\"where\">{html.escape(where)}</p>"
            f"<div>{''.join(parts)}</div></body></html>\n")


def write_previews(hits: list[Hit], folder: str | None = None) -> list[str | None]:
    """The preview file of each hit (None where it could not be written: a full disk,
    a folder not ours; Quick Look then shows the file itself)."""
    if not hits:
        return []
    folder = folder or paths.preview_dir()
    try:
        paths.ensure_private_dir(folder)
    except OSError:
        return [None] * len(hits)
    out: list[str | None] = []
    wrote = False
    for hit in hits:
        data = page(hit).encode("utf-8", "replace")
        path = os.path.join(folder, hashlib.sha256(data).hexdigest()[:32] + ".html")
        try:
            if os.path.exists(path):
                os.utime(path)  # shown again: the newest to keep
            else:
                paths.write_atomic(path, data)
                wrote = True
            out.append(path)
        except OSError:
            out.append(None)
    if wrote:
        prune(folder)
    return out


def prune(folder: str, keep: int = MAX_PREVIEWS) -> None:
    """Remove the oldest previews beyond ``keep``."""
    try:
        found = [(e.stat().st_mtime_ns, e.path) for e in os.scandir(folder)
                 if e.name.endswith(".html") and e.is_file(follow_symlinks=False)]
    except OSError:
        return
    if len(found) <= keep:
        return
    for _, path in sorted(found)[: len(found) - keep]:
        with contextlib.suppress(OSError):
            os.remove(path)
