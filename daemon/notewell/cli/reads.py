"""The commands that read the index: search, recent, show, tags, similar, related, status.
Each asks the running daemon when there is one, else a short-lived in-process engine."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from notewell.cli.common import (
    arg,
    command,
    daemon_request,
    limit,
    one_shot_engine,
    print_hits,
)
from notewell.wire.requests import MAX_PAGE_CHARS, MAX_RELATED_CHARS, OPS, default

JSON = arg("--json", action="store_true")
HITS_JSON = arg("--json", action="store_true", help="print hits as JSON")
# recent's and related's filters
NOTE_FILTERS = (
    arg("--source", help="only this source (its configured name)"),
    arg("--tag", action="append", default=[], dest="tags", metavar="TAG",
        help="only notes with this tag (nested tags included); repeatable"),
    arg("--after", help="modified on or after this date"),
    arg("--before", help="modified before this date"))


def filters(args: argparse.Namespace) -> dict:
    """The filters the command takes (``--source``, ``--tag``, the dates), the dates
    checked here so a bad one fails before anything loads."""
    from notewell.search import dates

    found = {name: getattr(args, name) for name in ("source", "tags") if hasattr(args, name)}
    for flag, name in (("after", "modified_after"), ("before", "modified_before")):
        value = getattr(args, flag, None)
        if value is not None:
            try:
                dates.parse(value, name=f"--{flag}")
            except dates.DateError as e:
                raise SystemExit(f"notewell: {e}") from None
            found[name] = value
    return found


def read_op(args: argparse.Namespace, op: str, **kw) -> dict:
    """The daemon's answer to a read op, else the same answer (``api``) in this process,
    its arguments checked as the daemon checks them. A bad argument or unknown note is a
    message and exit 1, from either side."""
    from notewell import api

    result = daemon_request(op, **kw)
    if result is not None:
        return result
    try:
        return local_answer(args, op, kw)
    except api.OpError as e:
        raise SystemExit(f"notewell: {e}") from None


def print_answer(args: argparse.Namespace, op: str, **kw) -> int:
    """The hits ``op`` answers (``read_op``) within the filters given, printed."""
    result = read_op(args, op, **kw, **filters(args))
    print_hits(result["hits"], result["notices"], args.json)
    return 0


def local_answer(args: argparse.Namespace, op: str, kw: dict) -> dict:
    """``op``'s answer from a one-shot engine (no daemon); raises ``api.OpError``. The
    arguments are checked before the engine opens: a bad one fails at once."""
    from notewell import api
    from notewell.wire.requests import BadArguments, request_args

    try:
        checked = request_args(op, kw)
    except BadArguments as e:
        raise api.refusal(e) from None  # type: ignore[misc]
    engine = one_shot_engine(args)
    try:
        with engine.reading() as view:
            return api.answer(view, op, checked)
    finally:
        engine.close()


@command(help="search from the terminal",
         description="Search your notes. Filters go in the query: #tag (a nested tag includes "
         "its children; several intersect) and in:SOURCE (a configured source name). The "
         "last word is matched as a prefix while you type.",
         arguments=(arg("query", nargs="+",
                        help="what to look for, with optional #tag and in:NAME"),
                    limit("search"), HITS_JSON,
                    arg("--mode", choices=OPS["search"]["mode"].choices,
                        default=default("search", "mode", "cli"),
                        help="ranking: hybrid (default), dense only or BM25 only"),
                    arg("--after", help="only notes modified on or after this date: 2025-03-01, "
                        "2025-06 (a month), 2025, or a time ago: 7d, 2w, 3m, 1y"),
                    arg("--before", help="only notes modified before this date (same forms)")))
def cmd_search(args: argparse.Namespace) -> int:
    return print_answer(args, "search", query=" ".join(args.query), limit=args.limit,
                        mode=args.mode)


@command(help="the most recently modified notes",
         description="The most recently modified notes, newest first. Dates: 2025-03-01, "
         "2025-06 (a month), 2025, or a time ago: 7d, 2w, 3m, 1y.",
         arguments=(limit("recent"), *NOTE_FILTERS, JSON))
def cmd_recent(args: argparse.Namespace) -> int:
    return print_answer(args, "recent", limit=args.limit)


@command(help="a note's text, or one section of it",
         description="Print the Markdown text of NOTE_ID (as shown by `search --json`) as its "
         "source holds it now, or only the section under --heading. Long notes come in "
         "pages: --offset and --max-chars.",
         arguments=(arg("note_id"),
                    arg("--heading", help="only this section: a heading's text or its path "
                        "(\"Setup > Linux\"), any case"),
                    arg("--offset", type=int, default=0, help="first character (default 0)"),
                    arg("--max-chars", type=int, default=default("note", "max_chars", "cli"),
                        help="characters per page (default %(default)s, at most "
                        f"{MAX_PAGE_CHARS})"),
                    arg("--json", action="store_true", help="the page and the note's details "
                        "as JSON")))
def cmd_show(args: argparse.Namespace) -> int:
    page = read_op(args, "note", note_id=args.note_id, heading=args.heading,
                 offset=args.offset, max_chars=args.max_chars)
    if args.json:
        print(json.dumps(page, indent=2, ensure_ascii=False))
        return 0
    sys.stdout.write(page["text"] + ("" if page["text"].endswith("\n") else "\n"))
    if page["next_offset"] is not None:
        print(f"notewell: {page['total_chars'] - page['next_offset']} more characters: "
              f"--offset {page['next_offset']}", file=sys.stderr)
    return 0


@command(help="tags with their note counts",
         description="Every tag with the number of notes carrying it; a nested tag's "
         "parents count the notes of all their children.",
         arguments=(arg("prefix", nargs="?", help="only tags starting with this"), JSON))
def cmd_tags(args: argparse.Namespace) -> int:
    tags = read_op(args, "tags", prefix=args.prefix)["tags"]
    if args.json:
        print(json.dumps(tags, indent=2, ensure_ascii=False))
    elif not tags:
        print("no tags" + (f" starting with {args.prefix!r}" if args.prefix else ""))
    for t in [] if args.json else tags:
        print(f"{t['notes']:6}  #{t['tag']}")
    return 0


@command(help="notes closest in meaning to a note",
         description="List the notes closest in meaning to NOTE_ID (as shown by `search "
         "--json`), excluding the note itself.",
         arguments=(arg("note_id"), limit("similar"), JSON))
def cmd_similar(args: argparse.Namespace) -> int:
    # strict: an unknown id is an error (exit 1), not an empty list.
    return print_answer(args, "similar", note_id=args.note_id, limit=args.limit, strict=True)


@command(help="notes closest in meaning to any text (an argument, stdin, or a file)",
         description="List the notes closest in meaning to TEXT: the argument, or standard "
         "input when it is '-' or left out (piped: `pbpaste | notewell related`), or the text "
         "of a Markdown, text or PDF file (--file; a note of a configured source is left out "
         f"of its own list). At most {MAX_RELATED_CHARS:,} characters are read.",
         arguments=(arg("text", nargs="?", help="the text ('-' or none: standard input)"),
                    arg("--file", metavar="PATH",
                        help="read the text of this .md, .txt or .pdf file instead"),
                    limit("related"), *NOTE_FILTERS, HITS_JSON))
def cmd_related(args: argparse.Namespace) -> int:
    if args.file is not None:
        if args.text is not None:
            raise SystemExit("notewell: give TEXT or --file, not both")
        given = {"path": os.path.abspath(os.path.expanduser(args.file))}
    else:
        if args.text is None and sys.stdin.isatty():
            raise SystemExit("notewell: give the text as an argument, pipe it in "
                             "(`pbpaste | notewell related`), or name a file with --file")
        if args.text in (None, "-"):
            # Bytes that are not UTF-8 arrive as replacement characters, which the daemon
            # tells from text.
            raw = sys.stdin.buffer.read(4 * MAX_RELATED_CHARS + 4)
            text = raw.decode("utf-8", "replace")
        else:
            text = args.text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        given = {"text": text[:MAX_RELATED_CHARS],
                 "truncated": len(text) > MAX_RELATED_CHARS}
    return print_answer(args, "related", limit=args.limit, **given)


@command(help="what is indexed, per source, and the daemon's state",
         description="Counts, model, index version and per-source sync state.",
         arguments=(arg("--json", action="store_true", help="machine-readable output"),))
def cmd_status(args: argparse.Namespace) -> int:
    status = daemon_request("status")
    if status is None:
        status = {**local_answer(args, "status", {}), "state": "not running"}
    if args.json:
        print(json.dumps(status, indent=2, ensure_ascii=False))
        return 0
    print(f"daemon:  {status.get('state')}" + (f" (pid {status['pid']})"
                                                 if status.get("pid") else ""))
    print(f"notes:   {status['notes']}   chunks: {status['chunks']}")
    print(f"model:   {status['model']}")
    print(f"index:   v{status['index_version']} {status['index_path']}")
    if status.get("re_chunking"):
        print("         cut by an older chunker: the next sync rebuilds it beside, embedding "
              "only the passages that changed; it answers meanwhile")
    copies = status.get("in_memory") or {}
    if status.get("pid"):  # a running daemon's copies; a one-shot command keeps none
        print("memory:  " + ", ".join(
            f"{name} copy {'loading' if size is None else f'{size / 2**20:.0f} MB'}"
            for name, size in copies.items()))
        states = status.get("copies") or {}
        if states:  # a failed load says why and when it is tried again
            print("copies:  " + ", ".join(f"{name} {state}" for name, state in states.items()))
    for s in status["sources"]:
        when = (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s["last_sync"]))
                if s["last_sync"] else "never")
        line = f"  {s['name']} ({s['type']}): {s['notes']} notes, last sync {when}"
        if s.get("pending"):
            line += f", {s['pending']} changed notes not yet indexed"
        if s.get("offloaded"):
            n = s["offloaded"]
            line += f", {n} note{'s' if n != 1 else ''} in iCloud, not downloaded"
        if s.get("links_out"):
            n = s["links_out"]
            line += (f", {n} link{'s' if n != 1 else ''} out of the folder skipped "
                     f"(e.g. {s.get('link_out')})")
        if s.get("behind_since"):
            line += f", behind for {(time.time() - s['behind_since']) / 60:.0f} min"
        if s.get("last_error"):
            line += f"  ERROR: {s['last_error']}"
        print(line)
    return 0
