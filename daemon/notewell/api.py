"""The read ops' answers: one function per op of ``wire.requests.OPS``, in ``OPS_TABLE``.

Every front end answers a read op here: the daemon's handlers (``serve.handlers``), the
CLI when no daemon runs (``cli.reads``) and, through the handlers, the MCP tools
(``agents.link``), so an op gives the same keys, hits and errors on each. A function
takes a read view (``Engine.reading()``) and the op's arguments already checked by
``wire.requests``, and calls only the view's read methods. What only a running daemon
knows (how far the index lags, a rebuild going on, its pid) and the transport (Alfred's
format, the prepared answers) the daemon adds in ``serve.handlers``; without a daemon
those keys are absent.

``refusal`` turns the errors a read raises on bad input (a bad date, an argument the
notes cannot take, an unknown note or heading) into one ``OpError`` with its wire code.

Sits at the engine layer: may import ``engine`` and what is below it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from notewell.engine import HeadingNotFound, NoteNotFound
from notewell.search.dates import DateError
from notewell.search.searcher import SearchResult
from notewell.wire import requests

# A note's best passages a JSON search lists (``Hit.passages``): Raycast's detail pane
# and an agent see why a note matched beyond its best passage.
PASSAGES_PER_HIT = 3


class OpError(Exception):
    """An op refused: ``code`` as the wire says it (a read's input: ``bad_args``,
    ``bad_date``, ``not_found``; the daemon's state: ``warming_up``, ``unavailable``...),
    the message saying what to do."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def refusal(e: BaseException) -> OpError | None:
    """The ``OpError`` a read's exception means, or None when it is not about the input
    (a bug, a broken index: the caller reports it as such)."""
    if isinstance(e, OpError):
        return e
    if isinstance(e, DateError):
        return OpError("bad_date", str(e))
    if isinstance(e, requests.BadArguments):  # the engine's ArgumentError too
        return OpError(e.code, str(e))
    if isinstance(e, (NoteNotFound, HeadingNotFound)):
        return OpError("not_found", str(e.args[0]))
    return None


def answer(view: Any, op: str, args: dict) -> dict:
    """``op``'s answer to its checked ``args`` (``wire.requests.request_args``); raises
    ``OpError`` for what the notes cannot answer (an unknown note, a bad date)."""
    try:
        return OPS_TABLE[op](view, args)
    except Exception as e:
        refused = refusal(e)
        if refused is None:
            raise
        raise refused from None


def filters(args: dict) -> dict:
    """The filters of checked search or recent arguments, as the view takes them."""
    return {**{k: args[k] for k in requests.FILTERS}, "tags": tuple(args["tags"])}


@dataclass(frozen=True)
class Searched:
    """A search's answer before it is written out (as JSON here, for Alfred by the
    daemon): the tags being typed (``#wor``), else the search's result and how to create
    a note from the query."""

    query: str
    result: SearchResult | None  # None: ``tags`` answered
    tags: list[dict] | None
    new_notes: list[dict]

    @property
    def timeless(self) -> bool:
        """The same answer later on the same index: no date filter, which may be relative
        ("7d", typed or given) and so move with the clock. Read from the query the search
        parsed: the daemon decides from it whether a prepared answer is kept."""
        return self.result is None or not self.result.query.dated

    def to_dict(self) -> dict:
        if self.result is None:
            return {"hits": [], "notices": [], "tags": self.tags, "new_note": []}
        return {**self.result.to_dict(), "new_note": self.new_notes}


def searched(view: Any, args: dict, passages: int | None = None) -> Searched:
    """The search of checked ``args``: a query that is one tag being typed, with no
    filter given, lists the tags that start so instead. ``passages``: how many of a
    note's best passages its hit lists (``PASSAGES_PER_HIT`` unless given)."""
    query, given = args["query"], filters(args)
    tags = view.tag_completions(query) if not any(given.values()) else None
    if tags is not None:
        return Searched(query, None, tags, [])
    result = view.search(query, limit=args["limit"], mode=args["mode"], **given,
                         passages=PASSAGES_PER_HIT if passages is None else passages)
    return Searched(query, result, None, view.new_notes(query))


def op_search(view: Any, args: dict) -> dict:
    return searched(view, args).to_dict()


def op_similar(view: Any, args: dict) -> dict:
    note_id = args["note_id"]
    hits = view.similar(note_id, args["limit"])
    if not hits and args["strict"]:
        # No neighbours, or no such note: only the second is an error (for agents), and
        # reading the note says which (NoteNotFound).
        view.note(note_id, max_chars=1)
    return {"hits": [h.to_dict() for h in hits], "notices": []}


def op_note(view: Any, args: dict) -> dict:
    return view.note(args["note_id"], heading=args["heading"], offset=args["offset"],
                     max_chars=args["max_chars"])


def op_tags(view: Any, args: dict) -> dict:
    tags = view.tags(args["prefix"])
    return {"tags": tags[:requests.MAX_TAGS_REPLY], "total": len(tags)}


def op_recent(view: Any, args: dict) -> dict:
    return view.recent(args["limit"], **filters(args)).to_dict()


def related(view: Any, args: dict) -> SearchResult:
    """The notes nearest in meaning to ``text``, or to the text of the file at ``path``
    (read by the view: ``ReadView.related_file``), within the filters."""
    text, path = args["text"], args["path"]
    if (text is None) == (path is None):
        raise requests.BadArguments("text: required (or path: a Markdown, text or PDF "
                                    "file to read it from), not both", "text")
    if path is not None:
        return view.related_file(path, args["limit"], **filters(args))
    return view.related(text, args["limit"], truncated=args["truncated"], **filters(args))


def op_related(view: Any, args: dict) -> dict:
    return related(view, args).to_dict()


def op_status(view: Any, args: dict) -> dict:
    return view.status()


OPS_TABLE: dict[str, Callable[[Any, dict], dict]] = {
    "search": op_search,
    "similar": op_similar,
    "note": op_note,
    "tags": op_tags,
    "recent": op_recent,
    "related": op_related,
    "status": op_status,
}
