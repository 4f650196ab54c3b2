"""The tools an agent sees: their schemas, the checks on what it sends, what is asked of
the daemon, and the structured and text answers.

Pure data and string work, no SDK and no I/O, so the same definitions serve
``tools/list``, the argument checks and the tests. A tool's input schema is generated
from its daemon op's arguments (``wire.requests``: types, defaults, limits), with the
descriptions written here; the same module checks what an agent sends. Every tool only
reads; nothing here can write a note or name a file: a note is reached by its id, through
the daemon, which reads only notes of its configured sources.

Answers are sized for an agent's context: a search hit's text entry is a title, heading
path, a snippet of at most ``SNIPPET_CHARS`` and the note id, so eight hits stay well
under 2,000 tokens; a note comes in pages (``get_note``'s ``max_chars``).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from notewell.wire import requests

SNIPPET_CHARS = 240
MAX_TAGS_LISTED = 500
DATE_FORMS = ("2025-03-01, 2025-06 (a month), 2025 (a year), today, yesterday, or a time "
              "ago: 7d, 2w, 3m, 1y")


# -- schemas --------------------------------------------------------------------------------


def _nullable(kind: str, **extra: Any) -> dict:
    return {"type": [kind, "null"], **extra}


def _object(properties: dict, optional: tuple[str, ...] = ()) -> dict:
    """An object schema: every property required but those ``optional``."""
    return {"type": "object", "properties": properties,
            "required": [name for name in properties if name not in optional]}


_STR_LIST = {"type": "array", "items": {"type": "string"}}
_NOTE_ID = "A note_id from search_notes, recent_notes or similar_notes."

_SPANS = {"type": "array", "items": {"type": "array", "items": {"type": "integer"},
                                     "minItems": 2, "maxItems": 2}}
HIT = _object({
    "note_id": {"type": "string"},
    "title": {"type": "string"},
    "source": {"type": "string"},
    "url": {"type": "string", "description": "Opens the note in its app."},
    "path": _nullable("string"),
    "tags": _STR_LIST,
    "heading_path": {"type": "string", "description": "Headings above the passage "
                     "that matched, outermost first, joined by ' > '."},
    "snippet": {"type": "string", "maxLength": SNIPPET_CHARS},
    "spans": {**_SPANS, "description": "Where the query's words are in the snippet: "
              "[start, end) character offsets (for a note found by meaning alone, "
              "none, or its sentence nearest the query)."},
    "passages": {
        "type": "array", "maxItems": 3,
        "description": "The note's best matching passages, best first (the snippet's "
                       "first), each cut around its first match.",
        "items": _object({
            "heading_path": {"type": "string"},
            "text": {"type": "string", "maxLength": SNIPPET_CHARS},
            "spans": {**_SPANS, "description": "The query's words in text."},
            "score": {"type": "number"}})},
    "score": {"type": "number"},
    "modified": _nullable("string", description="ISO 8601, local time."),
    "archived": {"type": "boolean"},
}, optional=("spans", "passages"))
BEHIND = {
    **_object({"minutes": {"type": "integer"}, "sources": _STR_LIST,
               "error": _nullable("string")}, optional=("error",)),
    "type": ["object", "null"],
    "description": "Null when the index is up to date; else how many minutes it lags and "
                   "behind which sources.",
}
HITS = _object({"hits": {"type": "array", "items": HIT},
                "notices": {**_STR_LIST, "description": "Why a filter matched nothing."}})


def _input(op: str, descriptions: dict[str, str | None]) -> dict:
    """A tool's input schema: the daemon op's arguments named in ``descriptions``, their
    types, defaults and limits as ``wire.requests`` generates them for agents, with the
    descriptions an agent reads."""
    schema = requests.schema(op, tuple(descriptions), agents=True)
    for name, description in descriptions.items():
        if description:
            schema["properties"][name]["description"] = description
    return schema


def _similar_input() -> dict:
    """``similar_notes``' input: a note's id (op ``similar``) or any text (op
    ``related``), one of the two."""
    schema = _input("similar", {"note_id": _NOTE_ID + " Leave it out when giving text.",
                                "limit": None})
    schema["properties"]["text"] = _input("related", {"text": (
        "Instead of note_id: any text (a passage, a draft, a question at length); the "
        "notes closest to it in meaning. At most "
        f"{requests.MAX_RELATED_CHARS:,} characters.")})["properties"]["text"]
    schema["required"] = []
    return schema


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    op: str  # the daemon op it asks
    input_schema: dict
    output_schema: dict
    fixed: tuple[tuple[str, object], ...] = ()  # arguments the op always gets


TOOLS: dict[str, ToolSpec] = {t.name: t for t in (
    ToolSpec(
        "search_notes", "Search notes",
        "Search the user's own notes (Bear, Obsidian, Markdown) by meaning and keywords, "
        "as their launcher does: one hit per note with its best matching passage. Use the "
        "note_id of a hit with get_note to read it. Filters: tags (nested tags included), "
        "source, and modification dates (" + DATE_FORMS + "); modified_after includes the "
        "date named, modified_before excludes it.",
        "search", _input("search", {
            "query": "What to look for, in words; '#tag' and 'in:source' may also be "
                     "typed in it.",
            "limit": None,
            "tags": "Only notes with all of these tags.",
            "source": "Only notes of this source (see index_status).",
            "modified_after": None,
            "modified_before": None,
        }),
        _object({**HITS["properties"], "behind": BEHIND}),
    ),
    ToolSpec(
        "get_note", "Read a note",
        "A note's text as Markdown, with its title, tags, url and modification date; or "
        "only the section under `heading` (a heading's text, or a path like 'Setup > "
        "Linux'). Long notes come in pages: call again with offset=next_offset.",
        "note", _input("note", {"note_id": _NOTE_ID, "heading": None, "offset": None,
                                "max_chars": None}),
        _object({
            "note_id": {"type": "string"}, "title": {"type": "string"},
            "source": {"type": "string"}, "url": {"type": "string"},
            "path": _nullable("string"), "tags": _STR_LIST,
            "modified": _nullable("string"), "heading": _nullable("string"),
            "text": {"type": "string"}, "offset": {"type": "integer"},
            "total_chars": {"type": "integer"},
            "next_offset": _nullable("integer", description="Where the next page "
                                     "starts; null on the last page."),
            "headings": {**_STR_LIST, "description": "Every heading of the note."},
        }),
    ),
    ToolSpec(
        "similar_notes", "Notes similar to a note or a text",
        "The notes closest in meaning to a note (note_id; the note itself left out), or "
        "to any text given instead (text: what the user is reading or writing).",
        "similar", _similar_input(),
        HITS,
        # An unknown note_id is an error an agent can act on, not an empty list.
        fixed=(("strict", True),),
    ),
    ToolSpec(
        "recent_notes", "Recently modified notes",
        "The most recently modified notes, newest first, optionally of one source or "
        "with all of some tags.",
        "recent", _input("recent", {"limit": None, "source": None, "tags": None}),
        HITS,
    ),
    ToolSpec(
        "list_tags", "List tags",
        "The tags in the user's notes with how many notes carry each; nested tags as "
        "paths (work/projects), a parent counting its children's notes. `prefix` keeps "
        f"the tags starting with it. At most {MAX_TAGS_LISTED} are listed.",
        "tags", _input("tags", {"prefix": None}),
        _object({
            "tags": {"type": "array", "items": _object(
                {"tag": {"type": "string"}, "notes": {"type": "integer"}})},
            "total": {"type": "integer", "description": "Tags matching, listed or not."},
        }),
    ),
    ToolSpec(
        "index_status", "Index status",
        "What notewell has indexed: per source the notes, last sync and last error; "
        "whether the index is behind its sources.",
        "status", _input("status", {}),
        _object({
            "state": {"type": "string"}, "version": {"type": "string"},
            "notes": {"type": "integer"}, "chunks": {"type": "integer"},
            "last_sync": _nullable("string"), "behind": BEHIND,
            "rebuilding": {"type": "boolean"},
            "sources": {"type": "array", "items": _object({
                "name": {"type": "string"}, "type": {"type": "string"},
                "notes": {"type": "integer"}, "last_sync": _nullable("string"),
                "last_error": _nullable("string"), "pending": {"type": "integer"}})},
            "errors": _STR_LIST,
        }),
    ),
)}

# -- checking what an agent sends and what the daemon is asked ------------------------------


def check(spec: ToolSpec, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """The arguments with defaults filled in, or ``requests.BadArguments`` naming the
    first wrong one. Reads the input schema, so what ``tools/list`` shows is what is
    checked (the SDK's low-level server does not check it)."""
    args = requests.check(spec.input_schema, arguments, spec.name)
    if spec.name == "similar_notes" and (args["note_id"] is None) == (args["text"] is None):
        raise requests.BadArguments("note_id: required, or text instead (not both)",
                                    "note_id")
    return args


def request(name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The daemon op and its arguments for a checked tool call."""
    spec = TOOLS[name]
    if name == "similar_notes" and args.get("text") is not None:
        return "related", {"text": args["text"], "limit": args["limit"]}
    return spec.op, {k: v for k, v in {**args, **dict(spec.fixed)}.items()
                     if not (name == "similar_notes" and k == "text")}


# -- answers -------------------------------------------------------------------------------


def iso(t: float | None) -> str | None:
    """Unix seconds as ISO 8601 in local time, to the second."""
    if t is None:
        return None
    return datetime.datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def _hit(h: dict) -> dict:
    snippet, spans = cut(str(h.get("snippet") or ""), h.get("snippet_spans") or [],
                         SNIPPET_CHARS, around=False)
    passages = []
    for p in (h.get("passages") or [])[:3]:
        text, marks = cut(str(p.get("text") or ""), p.get("spans") or [], SNIPPET_CHARS)
        passages.append({"heading_path": str(p.get("heading_path") or ""), "text": text,
                         "spans": marks, "score": float(p.get("score") or 0.0)})
    return {"note_id": h["note_id"], "title": h["title"], "source": h["source"],
            "url": h["url"], "path": h.get("path"), "tags": list(h.get("tags") or []),
            "heading_path": h.get("heading_path") or "", "snippet": snippet,
            "spans": spans, "passages": passages,
            "score": float(h.get("score") or 0.0), "modified": iso(h.get("modified")),
            "archived": bool(h.get("archived"))}


def cut(text: str, spans: list, limit: int, around: bool = True
        ) -> tuple[str, list[list[int]]]:
    """``text`` on one line (runs of whitespace as one space) and at most ``limit``
    characters, with ``spans`` moved to match and those cut off dropped; ``around``: the
    cut starts a few words before the first span rather than at the text's start."""
    out: list[str] = []
    at: list[int] = []  # where each character of ``text`` went
    for ch in text:
        if ch.isspace():
            if out and out[-1] != " ":
                out.append(" ")
            at.append(len(out) - 1 if out else 0)
        else:
            at.append(len(out))
            out.append(ch)
    flat = "".join(out).rstrip()
    at.append(len(flat))
    moved = [[at[s], at[e - 1] + 1] for s, e in spans if 0 <= s < e <= len(text)]
    start = 0
    if around and moved and len(flat) > limit and moved[0][0] > 40:
        space = flat.find(" ", moved[0][0] - 40, moved[0][0])
        start = space + 1 if space >= 0 else moved[0][0]
    lead = "…" if start else ""
    room = limit - len(lead)
    body = flat[start:]
    tail = ""
    if len(body) > room:
        body, tail = body[:room - 1].rstrip(), "…"
    shift = len(lead) - start
    kept = [[s + shift, e + shift] for s, e in moved if s >= start and e - start <= len(body)]
    return lead + body + tail, kept


def _behind(b: dict | None) -> dict | None:
    if not b:
        return None
    error = b.get("error")
    if isinstance(error, (list, tuple)) and error:
        error = ": ".join(str(e) for e in error)
    return {"minutes": int(b.get("minutes") or 0), "sources": list(b.get("sources") or []),
            "error": str(error) if error else None}


def structured(name: str, result: dict, args: dict[str, Any]) -> dict:
    """The tool's structured answer (matching its output schema) from the daemon's."""
    if name in ("search_notes", "similar_notes", "recent_notes"):
        out = {"hits": [_hit(h) for h in result.get("hits", [])],
               "notices": list(result.get("notices") or [])}
        if name == "search_notes":
            out["behind"] = _behind(result.get("behind"))
        return out
    if name == "get_note":  # the keys of its output schema
        return {**{k: result.get(k) for k in TOOLS[name].output_schema["properties"]},
                "tags": list(result.get("tags") or []), "modified": iso(result.get("modified"))}
    if name == "list_tags":
        tags = result.get("tags", [])
        return {"tags": tags[:MAX_TAGS_LISTED], "total": len(tags)}
    if name == "index_status":
        sources = [{"name": s["name"], "type": s.get("type", ""),
                    "notes": int(s.get("notes") or 0), "last_sync": iso(s.get("last_sync")),
                    "last_error": s.get("last_error"), "pending": int(s.get("pending") or 0)}
                   for s in result.get("sources", [])]
        errors = [f"{s['name']}: {s['last_error']}" for s in sources if s["last_error"]]
        if result.get("problem"):
            errors.insert(0, str(result["problem"]))
        return {"state": str(result.get("state", "")), "version": str(result.get("version", "")),
                "notes": int(result.get("notes") or 0), "chunks": int(result.get("chunks") or 0),
                "last_sync": iso(result.get("last_sync")), "behind": _behind(result.get("behind")),
                "rebuilding": bool(result.get("rebuilding")), "sources": sources,
                "errors": errors}
    raise KeyError(name)


def text(name: str, out: dict, args: dict[str, Any]) -> str:
    """The compact text block the model reads."""
    return _TEXT[name](out, args)


def _hits_text(out: dict, heading: str) -> str:
    lines = [heading]
    lines += [f"! {n}" for n in out["notices"]]
    for i, h in enumerate(out["hits"], 1):
        where = f" — {h['heading_path']}" if h["heading_path"] else ""
        date = f", {h['modified'][:10]}" if h["modified"] else ""
        tags = " " + " ".join("#" + t for t in h["tags"][:5]) if h["tags"] else ""
        lines.append(f"{i}. {h['title']}{where} [{h['source']}{date}]{tags}")
        if h["snippet"]:
            lines.append(f"   {h['snippet']}")
        lines.append(f"   note_id: {h['note_id']}")
    if not out["hits"] and not out["notices"]:
        lines.append("No matching notes.")
    return "\n".join(lines)


def _search_text(out: dict, args: dict) -> str:
    head = f"{len(out['hits'])} notes for {args['query'][:80]!r}"
    b = out["behind"]
    if b:
        head += (f" (the index is {b['minutes']} min behind {', '.join(b['sources'])}"
                 f"{': ' + b['error'] if b['error'] else ''})")
    return _hits_text(out, head + ":") + "\nRead one with get_note(note_id)."


def _note_text(out: dict, args: dict) -> str:
    section = f" § {out['heading']}" if out["heading"] else ""
    tags = " ".join("#" + t for t in out["tags"])
    head = f"# {out['title']}{section}\n[{out['note_id']} · {out['source']}"
    head += f" · modified {out['modified'][:10]}" if out["modified"] else ""
    head += f" · {tags}]" if tags else "]"
    tail = ""
    if out["next_offset"] is not None:
        tail = (f"\n\n[characters {out['offset']}–{out['next_offset']} of "
                f"{out['total_chars']}; more with get_note(note_id, offset="
                f"{out['next_offset']})]")
    return f"{head}\n\n{out['text']}{tail}"


def _tags_text(out: dict, args: dict) -> str:
    if not out["tags"]:
        return "No tags" + (f" starting with {args['prefix']!r}." if args["prefix"] else ".")
    lines = [f"#{t['tag']} ({t['notes']})" for t in out["tags"]]
    if out["total"] > len(out["tags"]):
        lines.append(f"… {out['total'] - len(out['tags'])} more; narrow with prefix.")
    return "\n".join(lines)


def _status_text(out: dict, args: dict) -> str:
    lines = [f"notewell {out['version']}: {out['state']}, {out['notes']} notes, "
             f"last sync {out['last_sync'] or 'never'}"]
    if out["behind"]:
        lines.append(f"behind by {out['behind']['minutes']} min: "
                     f"{', '.join(out['behind']['sources'])}")
    if out["rebuilding"]:
        lines.append("rebuilding a damaged index; answers may be incomplete")
    for s in out["sources"]:
        lines.append(f"- {s['name']} ({s['type']}): {s['notes']} notes, last sync "
                     f"{s['last_sync'] or 'never'}"
                     + (f", {s['pending']} changes pending" if s["pending"] else "")
                     + (f", error: {s['last_error']}" if s["last_error"] else ""))
    return "\n".join(lines)


_TEXT: dict[str, Callable[[dict, dict], str]] = {
    "search_notes": _search_text,
    "get_note": _note_text,
    "similar_notes": lambda out, args: _hits_text(out, f"{len(out['hits'])} notes similar "
                                                  + (f"to {args['note_id']}:" if args.get(
                                                      "note_id") else "to the text:")),
    "recent_notes": lambda out, args: _hits_text(
        out, f"{len(out['hits'])} most recently modified notes:"),
    "list_tags": _tags_text,
    "index_status": _status_text,
}
