"""What each read op takes: its arguments' types, defaults and limits, and the one check.

The daemon's handlers (``serve.handlers``), the CLI when no daemon runs (``cli.reads``)
and the MCP tools (``agents.tools``, whose input schemas are generated here) all take
their arguments from ``OPS`` and check them with ``check``, so the same bad argument gets
the same error, with the same limit, on every path; each read op is answered by one
function of ``api.OPS_TABLE``. The sync ops' few arguments
(``SYNC_OPS``) are checked the same way.

``check`` validates against a JSON Schema generated from ``OPS`` with ``jsonschema`` and
turns its first error into words an agent or a person can act on ("limit: must be from 1
to 50, got 80"). Not on the keystroke path: the client never imports this module, and
``jsonschema`` (about 150 ms) is imported on the first check.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from notewell.wire.protocol import MAX_QUERY_CHARS

# A note page by default: about 5,000 tokens.
PAGE_CHARS = 20_000
# The largest page on every path. An MCP answer carries a page twice (text block and
# structured content): 40,000 characters stay under the 25,000-token cut some agent
# clients apply to one tool result. A person in a terminal pages with --offset.
MAX_PAGE_CHARS = 40_000
# The most hits one search, similar or recent answer holds, on every path. 50 hits are
# about 10,000 tokens in an MCP answer, text and structured content (49 hits on the demo
# notes: 40,300 characters), under that same cut; Raycast asks for 30, Alfred for 20.
MAX_LIMIT = 50
MAX_TAGS = 20  # tags a filter may name
MAX_NAME_CHARS = 200  # a source name, a tag, a tag prefix
MAX_NOTE_ID_CHARS = 2_000  # a source name and a path (macOS: at most 1,024 bytes)
MAX_HEADING_CHARS = 1_000  # a heading path "A > B > C"
MAX_DATE_CHARS = 40
# The most tags one ``tags`` answer lists, by name (a tag is at most 100
# characters: about 0.6 MB), so no collection of notes can push it over the frame limit.
MAX_TAGS_REPLY = 5_000
# Related notes for any text (op ``related``): the text read, at most. A client cuts a
# longer selection to it and says so (``truncated``), as the daemon does for a file it
# reads, and the answer tells the user; longer text sent as is is refused. All of it
# counts, passage by passage (``ingest.selection.text_vector``): on the demo notes a selection of
# two notes' text finds the second note in the top 5 for 95% of pairs, against 28% when
# only the first window is read (bench/README.md, "Related notes"). The cost grows with
# the text: 10,000 characters of the demo notes are 32 passages, about a second at the
# 29 passages/s the shipped model embeds on an idle 2-core machine (6 s measured under a
# load average of 7 to 11).
MAX_RELATED_CHARS = 10_000
MAX_RELATED_FILE_BYTES = 20 * 1024 * 1024  # a Markdown, text or PDF file the daemon reads
MAX_PATH_CHARS = 4_096


class BadArguments(ValueError):
    """An argument an op cannot take; the message names it and says what it takes."""

    code = "bad_args"

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


class ArgumentError(BadArguments):
    """An argument a read cannot use given the notes (its type and range are checked
    here); ``name`` is the argument, the message says why."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}", name)


_SAME = object()  # an agent's default is the default


@dataclass(frozen=True)
class Arg:
    """One argument. ``type``: string, integer, boolean, tags (a list of tag names) or
    date (a date as ``search.dates`` reads it, or Unix seconds)."""

    type: str
    default: Any = None
    nullable: bool = False  # nil/null is taken, as if left out
    required: bool = False  # on every path; a required string must not be blank
    minimum: int | None = None
    maximum: int | None = None
    max_length: int | None = None
    choices: tuple[str, ...] = ()
    # Longer text is cut rather than refused where a person typed or pasted it (the zsh
    # client sends up to 60,000 characters as typed); an agent is refused, so it knows.
    cut: bool = False
    cli_default: Any = _SAME  # a terminal prints fewer hits than a launcher lists
    agent_default: Any = _SAME  # an agent's context wants fewer
    agent_required: bool = False


def _limit(default: int, cli: int, agent: int) -> Arg:
    return Arg("integer", default, minimum=1, maximum=MAX_LIMIT, cli_default=cli,
               agent_default=agent)


_NOTE_ID = Arg("string", required=True, max_length=MAX_NOTE_ID_CHARS)
_FILTERS = {
    "tags": Arg("tags", default=[]),
    "source": Arg("string", nullable=True, max_length=MAX_NAME_CHARS),
    "modified_after": Arg("date"),
    "modified_before": Arg("date"),
}
FILTERS = tuple(_FILTERS)

OPS: dict[str, dict[str, Arg]] = {
    "search": {
        "query": Arg("string", "", max_length=MAX_QUERY_CHARS, cut=True,
                     agent_required=True),
        "limit": _limit(20, cli=10, agent=8),
        "mode": Arg("string", "hybrid", choices=("hybrid", "dense", "bm25")),
        "format": Arg("string", "json", choices=("json", "alfred")),
        **_FILTERS,
    },
    "similar": {
        "note_id": _NOTE_ID,
        "limit": _limit(20, cli=10, agent=8),
        # An unknown id is an error (agents), not an empty list (the launcher).
        "strict": Arg("boolean", False),
    },
    "note": {
        "note_id": _NOTE_ID,
        "heading": Arg("string", nullable=True, max_length=MAX_HEADING_CHARS),
        "offset": Arg("integer", 0, minimum=0),
        "max_chars": Arg("integer", PAGE_CHARS, minimum=1, maximum=MAX_PAGE_CHARS),
    },
    "tags": {"prefix": Arg("string", nullable=True, max_length=MAX_NAME_CHARS)},
    "related": {
        # One of the two: the text itself, or a file whose text the daemon reads.
        "text": Arg("string", nullable=True, max_length=MAX_RELATED_CHARS),
        "path": Arg("string", nullable=True, max_length=MAX_PATH_CHARS),
        "truncated": Arg("boolean", False),  # the client cut a longer text to the limit
        "limit": _limit(20, cli=10, agent=8),
        "format": Arg("string", "json", choices=("json", "alfred")),
        **_FILTERS,
    },
    "recent": {"limit": _limit(10, cli=10, agent=10), **_FILTERS},
    "status": {},
}

# The ops that bring the index up to date (``serve.handlers``; no read, so no ``api``
# function): their arguments, checked as the read ops' are.
_SYNC_NOW = {"rebuild": Arg("boolean", False), "progress": Arg("boolean", False)}
SYNC_OPS: dict[str, dict[str, Arg]] = {
    "sync_now": _SYNC_NOW,  # a round by the sync thread, waited for (progress frames)
    "schedule_sync": {},  # a round soon; answered at once
    # The names of notewell 0.x before these (``sync_now`` and ``schedule_sync``),
    # accepted for one release: ``index`` is ``sync_now``, ``sync`` schedules, or with
    # ``wait`` waits for the round.
    "index": _SYNC_NOW,
    "sync": {"wait": Arg("boolean", False)},
}


def _args(op: str) -> dict[str, Arg]:
    return OPS[op] if op in OPS else SYNC_OPS[op]


def default(op: str, name: str, surface: str = "daemon") -> Any:
    """An argument's default for ``surface``: daemon, cli or agent."""
    arg = _args(op)[name]
    chosen = {"cli": arg.cli_default, "agent": arg.agent_default}.get(surface, _SAME)
    return copy.deepcopy(arg.default if chosen is _SAME else chosen)


# -- schemas --------------------------------------------------------------------------------


def _property(op: str, name: str, agents: bool, required: bool) -> dict:
    arg = _args(op)[name]
    if arg.type == "tags":
        prop: dict[str, Any] = {"type": "array", "maxItems": MAX_TAGS, "items": {
            "type": "string", "maxLength": MAX_NAME_CHARS}}
    elif arg.type == "date":
        prop = {"type": ["string", "number", "null"], "maxLength": MAX_DATE_CHARS}
    else:
        prop = {"type": [arg.type, "null"] if arg.nullable else arg.type}
    if arg.choices:
        prop["enum"] = list(arg.choices)
    if required and arg.type == "string":
        prop.update(minLength=1, pattern=r"\S")  # not blank
    for key, value in (("minimum", arg.minimum), ("maximum", arg.maximum),
                       ("maxLength", arg.max_length)):
        if value is not None:
            prop[key] = value
    if not required:
        prop["default"] = default(op, name, "agent" if agents else "daemon")
    return prop


def schema(op: str, names: tuple[str, ...] | None = None, agents: bool = False) -> dict:
    """The JSON Schema of ``op``'s arguments (those in ``names``, all by default). For
    ``agents`` (the MCP tools' ``inputSchema``): their defaults and required arguments,
    and an unknown argument is refused; the daemon ignores keys it does not know (a
    request also carries ``op``, ``v`` and ``notewell``)."""
    args = _args(op)
    names = tuple(args) if names is None else names
    required = [n for n in names if args[n].required or (agents and args[n].agent_required)]
    out = {"type": "object",
           "properties": {n: _property(op, n, agents, n in required) for n in names},
           "required": required}
    if agents:
        out["additionalProperties"] = False
    return out


_OP_SCHEMAS = {op: schema(op) for op in (*OPS, *SYNC_OPS)}


# -- the check -------------------------------------------------------------------------------


def request_args(op: str, req: dict) -> dict:
    """``op``'s arguments from a request (or a command's options): text marked ``cut``
    cut to its length, checked, defaults filled in. Raises ``BadArguments``."""
    args = _args(op)
    given = {name: req[name] for name in args if name in req}
    for name, arg in args.items():
        if arg.cut and isinstance(given.get(name), str):
            given[name] = given[name][:arg.max_length]
    return check(_OP_SCHEMAS[op], given, op)


def check(schema: dict, given: dict | None, who: str) -> dict:
    """``given`` checked against ``schema`` (one generated here), defaults filled in; or
    ``BadArguments`` naming the first wrong argument. ``who``: the op or tool, for the
    message on an unknown argument."""
    given = dict(given or {})
    validator, fields = _compiled(schema)
    errors = list(validator.iter_errors(given))
    if errors:
        props = list(schema["properties"])

        def order(e) -> tuple[int, int]:
            if e.validator in ("additionalProperties", "required"):
                return (0 if e.validator == "additionalProperties" else 1, 0)
            return (2, props.index(e.path[0]) if e.path and e.path[0] in props else 0)

        raise _explain(min(errors, key=order), schema, who)
    out = {}
    for name, fallback, integer in fields:
        if name not in given:
            out[name] = list(fallback) if isinstance(fallback, list) else fallback
        elif integer and isinstance(given[name], float):
            out[name] = int(given[name])  # JSON has one number type; 8.0 is 8
        else:
            out[name] = given[name]
    return out


# Per schema (by identity; they are built once): its validator, and each property's name,
# default and whether it is an integer.
_COMPILED: dict[int, tuple[dict, Any, list[tuple[str, Any, bool]]]] = {}


def _compiled(schema: dict) -> tuple[Any, list[tuple[str, Any, bool]]]:
    held = _COMPILED.get(id(schema))
    if held is None or held[0] is not schema:
        import jsonschema

        fields = [(name, prop.get("default"), prop.get("type") == "integer")
                  for name, prop in schema["properties"].items()]
        held = _COMPILED[id(schema)] = (schema, jsonschema.Draft202012Validator(schema),
                                        fields)
    return held[1], held[2]


_KINDS = {"string": "a string", "integer": "an integer", "number": "a number",
          "boolean": "true or false", "array": "a list of strings", "object": "an object"}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", bytes: "bytes"}.get(
                type(value), type(value).__name__)


def _explain(e, schema: dict, who: str) -> BadArguments:
    """Words for one ``jsonschema`` error: what is wrong and what is taken."""
    kw, value, rule = e.validator, e.instance, e.validator_value
    if kw == "additionalProperties":
        unknown = sorted(set(value) - set(schema["properties"]))
        takes = ", ".join(schema["properties"]) or "no arguments"
        return BadArguments(f"unknown argument {unknown[0][:100]!r}; {who} takes: {takes}",
                            unknown[0])
    if kw == "required":
        name = next(n for n in rule if n not in value)
        return BadArguments(f"{name}: required", name)
    name = str(e.path[0]) if e.path else who
    item = len(e.path) > 1  # one of a list's items
    if kw == "type":
        if item:
            why = f"must be a list of strings, got a list holding {_kind(value)}"
        else:
            kinds = [_KINDS[k] for k in ([rule] if isinstance(rule, str) else rule)
                     if k != "null"]
            why = f"must be {' or '.join(kinds)}, got {_kind(value)}"
    elif kw in ("minimum", "maximum"):
        low, high = e.schema.get("minimum"), e.schema.get("maximum")
        bounds = f"from {low} to {high}" if high is not None else f"{low} or more"
        why = f"must be {bounds}, got {value}"
    elif kw == "maxLength":
        why = (f"each at most {rule} characters" if item else
               f"at most {rule} characters") + f", got {len(value)}"
    elif kw == "maxItems":
        why = f"at most {rule} items, got {len(value)}"
    elif kw in ("minLength", "pattern"):
        why = "must not be empty"
    elif kw == "enum":
        why = f"must be one of {', '.join(map(str, rule))}; got {str(value)[:40]!r}"
    else:  # a keyword this module does not generate
        why = e.message[:200]
    return BadArguments(f"{name}: {why}", name)
