"""The commands that read the index: search, recent, show, tags, similar, related, status.
Each asks the running daemon when there is one, else a short-lived in-process engine."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from notewell.cli.common import (
    command,
    daemon_request,
    one_shot_engine,
    print_hits,
)


def date_filters(args: argparse.Namespace) -> dict:
    """The date filters given, checked here so a bad one fails before anything loads."""
    from notewell.search import dates

    found = {}
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
        with api.view(engine) as view:
            return api.answer(view, op, checked)
    finally:
        engine.close()


@command
def cmd_search(args: argparse.Namespace) -> int:
    query = " ".join(args.query)
    result = read_op(args, "search", query=query, limit=args.limit, mode=args.mode,
                   **date_filters(args))
    print_hits(result["hits"], result["notices"], args.json)
    return 0


@command
def cmd_recent(args: argparse.Namespace) -> int:
    result = read_op(args, "recent", limit=args.limit, source=args.source, tags=args.tags,
                   **date_filters(args))
    print_hits(result["hits"], result["notices"], args.json)
    return 0


@command
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


@command
def cmd_tags(args: argparse.Namespace) -> int:
    tags = read_op(args, "tags", prefix=args.prefix)["tags"]
    if args.json:
        print(json.dumps(tags, indent=2, ensure_ascii=False))
    elif not tags:
        print("no tags" + (f" starting with {args.prefix!r}" if args.prefix else ""))
    for t in [] if args.json else tags:
        print(f"{t['notes']:6}  #{t['tag']}")
    return 0


@command
def cmd_similar(args: argparse.Namespace) -> int:
    # strict: an unknown id is an error (exit 1), not an empty list.
    result = read_op(args, "similar", note_id=args.note_id, limit=args.limit, strict=True)
    print_hits(result["hits"], result["notices"], args.json)
    return 0


@command
def cmd_related(args: argparse.Namespace) -> int:
    from notewell.wire.requests import MAX_RELATED_CHARS

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
    result = read_op(args, "related", limit=args.limit, source=args.source, tags=args.tags,
                     **given, **date_filters(args))
    print_hits(result["hits"], result["notices"], args.json)
    return 0


@command
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


