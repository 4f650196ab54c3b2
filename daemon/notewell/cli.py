"""The ``notewell`` command. Each subcommand is a thin wrapper over one library call.

Commands that read (search, status, similar) ask the running daemon when there is one
and fall back to a short-lived in-process engine when there is not.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from notewell import __version__
from notewell.wire import paths

if TYPE_CHECKING:
    from notewell.model.embedding import Embedder

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}
# Commands that must start fast and stay thin: run before main imports anything heavy.
LIGHT_COMMANDS = frozenset({"mcp"})


def command(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    COMMANDS[fn.__name__.removeprefix("cmd_").replace("_", "-")] = fn
    return fn


class _Version(argparse.Action):
    # argparse's own "version" action re-wraps the text to the terminal's width.
    def __call__(self, parser, namespace, values, option_string=None) -> None:
        here = os.path.dirname(os.path.abspath(__file__))
        print(f"notewell {__version__} ({here}, Python {sys.version.split()[0]})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="notewell",
        description="Semantic search over your notes (Bear, Obsidian, Markdown), "
                    "answered by a warm local daemon. Files live in $NOTEWELL_HOME "
                    f"(now {paths.home()}).")
    p.add_argument("--version", action=_Version, nargs=0,
                   help="show the version, where this notewell is installed, and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="log more (to stderr)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("demo", help="index the bundled demo notes, start the daemon, run "
                       "example queries through the real client, stop",
                       description="Set up a demo: writes a config for the bundled demo "
                       "corpus, indexes it, starts the daemon, runs example queries through "
                       "the per-keystroke client and prints the Alfred JSON, then stops.")
    s.add_argument("queries", nargs="*", help="queries to run instead of the examples")

    s = sub.add_parser("index", help="build or update the index (with a progress bar)",
                       description="Bring the index up to date with every configured source. "
                       "Only changed notes are read and only new passages are embedded.")
    s.add_argument("--rebuild", action="store_true",
                   help="build a fresh index beside the live one and swap it in (needed "
                   "after a model or chunker change)")
    s.add_argument("--quiet", action="store_true", help="no progress bar")

    s = sub.add_parser("sync", help="sync now (through the daemon when it runs)",
                       description="Apply changes in the sources to the index now.")
    s.add_argument("--json", action="store_true", help="print the sync reports as JSON")

    s = sub.add_parser("serve", help="run the daemon in the foreground (what launchd runs)",
                       description="Run the daemon: load the model and index, answer on the "
                       "socket, keep the index in sync. Stops cleanly on SIGTERM.")
    s.add_argument("--poll", type=float, default=5.0, metavar="SECONDS",
                   help="how often to poll sources that file-system events do not cover "
                   "(default 5); Bear is checked every second")

    s = sub.add_parser("search", help="search from the terminal",
                       description="Search your notes. Filters go in the query: #tag (a "
                       "nested tag includes its children; several intersect) and in:SOURCE "
                       "(a configured source name). The last word is matched as a prefix "
                       "while you type.")
    s.add_argument("query", nargs="+", help="what to look for, with optional #tag and in:NAME")
    s.add_argument("--limit", type=int, default=10, help="how many notes (default 10)")
    s.add_argument("--json", action="store_true", help="print hits as JSON")
    s.add_argument("--mode", choices=("hybrid", "dense", "bm25"), default="hybrid",
                   help="ranking: hybrid (default), dense only or BM25 only")
    s.add_argument("--after", help="only notes modified on or after this date: "
                   "2025-03-01, 2025-06 (a month), 2025, or a time ago: 7d, 2w, 3m, 1y")
    s.add_argument("--before", help="only notes modified before this date (same forms)")

    s = sub.add_parser("show", help="a note's text, or one section of it",
                       description="Print the Markdown text of NOTE_ID (as shown by `search "
                       "--json`) as its source holds it now, or only the section under "
                       "--heading. Long notes come in pages: --offset and --max-chars.")
    s.add_argument("note_id")
    s.add_argument("--heading", help="only this section: a heading's text or its path "
                   "(\"Setup > Linux\"), any case")
    s.add_argument("--offset", type=int, default=0, help="first character (default 0)")
    s.add_argument("--max-chars", type=int, default=20_000,
                   help="characters per page (default 20000)")
    s.add_argument("--json", action="store_true", help="the page and the note's details "
                   "as JSON")

    s = sub.add_parser("tags", help="tags with their note counts",
                       description="Every tag with the number of notes carrying it; a "
                       "nested tag's parents count the notes of all their children.")
    s.add_argument("prefix", nargs="?", help="only tags starting with this")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("recent", help="the most recently modified notes",
                       description="The most recently modified notes, newest first. Dates: "
                       "2025-03-01, 2025-06 (a month), 2025, or a time ago: 7d, 2w, 3m, 1y.")
    s.add_argument("--limit", type=int, default=10, help="how many notes (default 10)")
    s.add_argument("--source", help="only this source (its configured name)")
    s.add_argument("--tag", action="append", default=[], dest="tags", metavar="TAG",
                   help="only notes with this tag (nested tags included); repeatable")
    s.add_argument("--after", help="modified on or after this date")
    s.add_argument("--before", help="modified before this date")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("similar", help="notes closest in meaning to a note",
                       description="List the notes closest in meaning to NOTE_ID (as shown "
                       "by `search --json`), excluding the note itself.")
    s.add_argument("note_id")
    s.add_argument("--limit", type=int, default=10)
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("eval", help="measure ranking quality on a golden set or a BEIR "
                       "dataset (Recall@5/@10, MRR@10, nDCG@10)",
                       description="Score the full pipeline (notewell), dense only, BM25 only "
                       "and a naive keyword baseline, overall and per query type. Without "
                       "options: the bundled golden set over the bundled demo notes. Corpora "
                       "are indexed into reusable throw-away indexes under "
                       "$NOTEWELL_HOME/eval/, so only the first run embeds.")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--golden", metavar="FILE", help="a JSONL golden set ({\"id\", \"query\", "
                   "\"relevant\": [note ids or paths], \"type\"}); scored against the "
                   "configured index unless --notes is given")
    g.add_argument("--beir", metavar="DIR", help="a BEIR dataset directory (corpus.jsonl, "
                   "queries.jsonl, qrels/SPLIT.tsv), indexed as notes (title plus text)")
    s.add_argument("--notes", metavar="DIR", help="with --golden: index this Markdown folder "
                   "(throw-away index) instead of using the configured one")
    s.add_argument("--split", default="test", help="BEIR qrels split (default test)")
    s.add_argument("--methods", default="notewell,dense,bm25,keyword",
                   help="comma-separated, from notewell, dense, bm25, keyword (default all)")
    s.add_argument("--json", action="store_true", help="print {method: {group: {metric: "
                   "value}}} as JSON")

    s = sub.add_parser("status", help="what is indexed, per source, and the daemon's state",
                       description="Counts, model, index version and per-source sync state.")
    s.add_argument("--json", action="store_true", help="machine-readable output")

    s = sub.add_parser("vaults", help="list the Obsidian vaults Obsidian knows about",
                       description="List the vaults in Obsidian's own registry "
                       "(obsidian.json), mark those already configured, and print a "
                       "[[sources]] table for each of the others.")
    s.add_argument("--registry", metavar="PATH",
                   help="read this obsidian.json instead of Obsidian's own")
    s.add_argument("--json", action="store_true", help="machine-readable output")

    s = sub.add_parser("alfred", help="build the Alfred workflow for this installation, or "
                       "open it in Alfred",
                       description="build: write notewell.alfredworkflow with this "
                       "installation's interpreter and client filled in. install: build it "
                       "and open it in Alfred (macOS).")
    s.add_argument("action", choices=("build", "install"))
    s.add_argument("--out", metavar="PATH", help="where to write the .alfredworkflow "
                   "(default: $NOTEWELL_HOME/alfred/notewell.alfredworkflow)")

    s = sub.add_parser("agent", help="start the daemon at login and keep it running "
                       "(launchd on macOS, systemd --user on Linux)",
                       description="install: write the LaunchAgent (or systemd user unit) "
                       "for this installation and start it. uninstall: stop and remove it. "
                       "status, start, stop, restart: what they say.")
    s.add_argument("action", choices=("install", "uninstall", "status", "start", "stop",
                                      "restart"))

    s = sub.add_parser("setup", help="find Bear and Obsidian notes, write the config, index, "
                       "install the agent and the Alfred workflow",
                       description="Find Bear's database and Obsidian's vaults, propose a "
                       "config that keeps the sources already configured, and with --yes "
                       "write it, build the index, install the agent and build the Alfred "
                       "workflow. Safe to run again.")
    s.add_argument("--yes", action="store_true", help="do it without asking")
    s.add_argument("--no-index", action="store_true", help="skip building the index")
    s.add_argument("--no-agent", action="store_true", help="skip installing the agent")
    s.add_argument("--no-workflow", action="store_true", help="skip the Alfred workflow")

    s = sub.add_parser("mcp", help="the MCP server for AI agents (stdio), or `mcp install` "
                       "to add it to Claude Desktop, Claude Code or Cursor",
                       description="Without an action: serve the Model Context Protocol on "
                       "stdin/stdout (what an agent's client runs), answering from the "
                       "daemon, which it starts when it is not running. install: add or "
                       "update the notewell entry in a client's configuration.")
    s.add_argument("action", nargs="?", choices=("install",),
                   help="install: add notewell to --client's configuration")
    s.add_argument("--client", choices=("claude-desktop", "claude-code", "cursor"),
                   help="with install: which client")
    s.add_argument("--dry-run", action="store_true", help="with install: print the change, "
                   "change nothing")
    s.add_argument("--no-start", action="store_true", help="never start the daemon; tools "
                   "report that it is down")
    s.add_argument("--wait", type=float, default=20.0, metavar="SECONDS",
                   help="how long a tool call waits for a starting daemon (default 20)")

    sub.add_parser("doctor", help="check each link from the SQLite extension to the Alfred "
                   "workflow, and say what to fix",
                   description="One line per check (ok, FAIL or skip) with the next step for "
                   "each failure; exits 1 if any check failed.")
    return p


def main(argv: list[str] | None = None, *,
         embedder: Callable[[], Embedder] | None = None) -> int:
    """Run one command. ``embedder`` makes the embedder for the commands that need one
    (default: the shipped model); tests wire in ``notewell.model.fake`` here."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.embedder = embedder or _default_embedder
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    if not args.command:
        parser.print_help()
        return 2
    if args.command in LIGHT_COMMANDS:  # imports no index, model or config code
        return COMMANDS[args.command](args)
    from notewell.config import ConfigError
    from notewell.index.schema import IndexProblem
    from notewell.model.files import ModelError
    from notewell.sources import SourceError

    try:
        return COMMANDS[args.command](args)
    except (ConfigError, IndexProblem, ModelError, SourceError) as e:
        print(f"notewell: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


# -- helpers ------------------------------------------------------------------------------


def _load_config():
    from notewell import config

    return config.load()


def _default_embedder() -> Embedder:
    """The model ``config.toml`` names in ``[model]``, else the shipped one."""
    from notewell.engine import embedder_for

    return embedder_for(_load_config())


def _engine(args: argparse.Namespace):
    """An engine for one command without the daemon. It answers from SQLite (sqlite-vec,
    FTS5) rather than building the in-memory copies a resident daemon keeps: building them
    in the background took a one-shot search from 0.57 to 0.95 s (bench/keystroke.py)."""
    from notewell.engine import Engine

    engine = Engine(_load_config(), embedder=args.embedder())
    engine.index.copies.settings.vectors = False
    engine.index.copies.settings.keywords = False
    return engine


def daemon_request(op: str, **args) -> dict | None:
    """The daemon's reply to one request, or None when no daemon is listening."""
    from notewell.wire import client, protocol

    try:
        reply = client.ask(protocol.request(op, **args), timeout=30.0)
    except (FileNotFoundError, ConnectionRefusedError):
        return None
    if not reply.get("ok"):
        err = reply.get("error", {})
        if err.get("code") == "warming_up":
            return None
        raise SystemExit(f"notewell: daemon: {err.get('message', err)}")
    return reply["result"]


def _print_hits(hits: list[dict], notices: list[str], as_json: bool) -> None:
    if as_json:
        print(json.dumps(hits, ensure_ascii=False, indent=2))
        for n in notices:
            print(f"notewell: {n}", file=sys.stderr)
        return
    for n in notices:
        print(f"! {n}")
    if not hits and not notices:
        print("no matching notes")
    for i, h in enumerate(hits, 1):
        where = h["heading_path"] or os.path.basename(h.get("path") or "")
        tags = " ".join("#" + t for t in h["tags"])
        print(f"{i:2}. {h['title']}  [{h['source']}]  {h['score']:.4f}")
        if where:
            print(f"    {where}")
        print(f"    {h['snippet']}")
        if tags:
            print(f"    {tags}")
        print(f"    {h['url']}")


# -- commands -------------------------------------------------------------------------------


@command
def cmd_demo(args: argparse.Namespace) -> int:
    from notewell.ops.demo import run_demo

    return run_demo(args.queries or None)


@command
def cmd_index(args: argparse.Namespace) -> int:
    from notewell.engine import rebuild

    config = _load_config()
    if not config.sources:
        print(f"notewell: no sources in {config.path}; add a [[sources]] table "
              "(see README) or run `notewell setup`", file=sys.stderr)
        return 1
    start = time.monotonic()
    if args.rebuild:
        from notewell.engine import chunker_for
        from notewell.sources import open_source

        embedder = args.embedder()
        reports = rebuild([open_source(s) for s in config.sources], embedder,
                          chunker_for(embedder), paths.index_dir(), progress=not args.quiet)[1]
    else:
        engine = _engine(args)
        reports = engine.sync(progress=not args.quiet)
        engine.close()
    for r in reports:
        _print_report(r.to_dict())
    print(f"done in {time.monotonic() - start:.1f}s")
    return 1 if any(r.error for r in reports) else 0


def _print_report(r: dict) -> None:
    if r.get("error"):
        print(f"{r['source']}: ERROR {r['error']}")
        return
    print(f"{r['source']}: {r['added']} added, {r['updated']} updated, {r['deleted']} deleted, "
          f"{r['unchanged']} unchanged; {r['embedded']} passages embedded, "
          f"{r['reused']} reused ({r['seconds']:.1f}s)")
    for w in r.get("warnings", [])[:20]:
        print(f"  warning: {w}")


@command
def cmd_sync(args: argparse.Namespace) -> int:
    result = daemon_request("sync", wait=True)
    if result is None:
        engine = _engine(args)
        reports = [r.to_dict() for r in engine.sync()]
        engine.close()
    else:
        reports = result["reports"]
    if args.json:
        print(json.dumps(reports, indent=2))
    else:
        for r in reports:
            _print_report(r)
    return 1 if any(r.get("error") for r in reports) else 0


@command
def cmd_serve(args: argparse.Namespace) -> int:
    from notewell.engine import Engine
    from notewell.ops.agent import record_command
    from notewell.serve.daemon import run

    record_command()  # where Raycast finds this installation to start the daemon
    return run(_load_config(), poll_seconds=args.poll,
               engine_factory=lambda cfg: Engine(cfg, embedder=args.embedder()))


def _dates(args: argparse.Namespace) -> dict:
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


def _read(args: argparse.Namespace, op: str, **kw) -> dict:
    """The daemon's answer to a read op, else the same library call in this process.
    A bad argument or unknown note is a message and exit 1, from either side."""
    from notewell.search.dates import DateError

    try:
        result = daemon_request(op, **kw)
        if result is not None:
            return result
        from notewell.engine import ArgumentError, HeadingNotFound, NoteNotFound

        engine = _engine(args)
        try:
            if op == "search":
                return engine.search(kw.pop("query"), **kw).to_dict()
            if op == "recent":
                return engine.recent(**kw).to_dict()
            if op == "note":
                return engine.note(**kw)
            if op == "tags":
                return {"tags": engine.tags(**kw)}
            raise ValueError(f"no library call for op {op!r}")
        except (ArgumentError, HeadingNotFound, NoteNotFound) as e:
            raise SystemExit(f"notewell: {e.args[0]}") from None
        finally:
            engine.close()
    except DateError as e:
        raise SystemExit(f"notewell: {e}") from None


@command
def cmd_search(args: argparse.Namespace) -> int:
    query = " ".join(args.query)
    result = _read(args, "search", query=query, limit=args.limit, mode=args.mode,
                   **_dates(args))
    _print_hits(result["hits"], result["notices"], args.json)
    return 0


@command
def cmd_recent(args: argparse.Namespace) -> int:
    result = _read(args, "recent", limit=args.limit, source=args.source, tags=args.tags,
                   **_dates(args))
    _print_hits(result["hits"], result["notices"], args.json)
    return 0


@command
def cmd_show(args: argparse.Namespace) -> int:
    page = _read(args, "note", note_id=args.note_id, heading=args.heading,
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
    tags = _read(args, "tags", prefix=args.prefix)["tags"]
    if args.json:
        print(json.dumps(tags, indent=2, ensure_ascii=False))
    elif not tags:
        print("no tags" + (f" starting with {args.prefix!r}" if args.prefix else ""))
    for t in [] if args.json else tags:
        print(f"{t['notes']:6}  #{t['tag']}")
    return 0


@command
def cmd_similar(args: argparse.Namespace) -> int:
    result = daemon_request("similar", note_id=args.note_id, limit=args.limit)
    if result is None:
        engine = _engine(args)
        result = {"hits": [h.to_dict() for h in engine.similar(args.note_id, args.limit)],
                  "notices": []}
        engine.close()
    if not result["hits"]:
        result["notices"].append(f"no note with id {args.note_id!r} (ids: `search --json`)")
    _print_hits(result["hits"], result["notices"], args.json)
    return 0


@command
def cmd_status(args: argparse.Namespace) -> int:
    status = daemon_request("status")
    if status is None:
        engine = _engine(args)
        status = engine.status()
        status["state"] = "not running"
        engine.close()
    if args.json:
        print(json.dumps(status, indent=2, ensure_ascii=False))
        return 0
    print(f"daemon:  {status.get('state')}" + (f" (pid {status['pid']})"
                                                 if status.get("pid") else ""))
    print(f"notes:   {status['notes']}   chunks: {status['chunks']}")
    print(f"model:   {status['model']}")
    print(f"index:   v{status['index_version']} {status['index_path']}")
    copies = status.get("in_memory") or {}
    if status.get("pid"):  # a running daemon's copies; a one-shot command keeps none
        print("memory:  " + ", ".join(
            f"{name} copy {'loading' if size is None else f'{size / 2**20:.0f} MB'}"
            for name, size in copies.items()))
    for s in status["sources"]:
        when = (time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s["last_sync"]))
                if s["last_sync"] else "never")
        line = f"  {s['name']} ({s['type']}): {s['notes']} notes, last sync {when}"
        if s.get("pending"):
            line += f", {s['pending']} changed notes not yet indexed"
        if s.get("behind_since"):
            line += f", behind for {(time.time() - s['behind_since']) / 60:.0f} min"
        if s.get("last_error"):
            line += f"  ERROR: {s['last_error']}"
        print(line)
    return 0


@command
def cmd_vaults(args: argparse.Namespace) -> int:
    from notewell.sources.obsidian import list_vaults

    vaults = list_vaults(args.registry)
    configured = {s.path for s in _load_config().sources if s.type == "obsidian"}
    for v in vaults:
        v["configured"] = os.path.abspath(v["path"]) in configured
    if args.json:
        print(json.dumps(vaults, indent=2, ensure_ascii=False))
        return 0
    if not vaults:
        print("Obsidian lists no vaults on this machine (no obsidian.json); add a vault by "
              "its folder with a [[sources]] table of type \"obsidian\"")
        return 0
    for v in vaults:
        flags = [f for f, on in (("configured", v["configured"]), ("missing", not v["exists"]),
                                 ("open", v["open"])) if on]
        print(f"{v['name']}  {v['path']}" + (f"  ({', '.join(flags)})" if flags else ""))
    todo = [v for v in vaults if v["exists"] and not v["configured"]]
    if todo:
        print("\nTo index a vault, add to config.toml:")
        for v in todo:
            name = "".join(c if c.isalnum() or c in "-_" else "-" for c in v["name"]).lower()
            path = v["path"].replace("\\", "\\\\").replace('"', '\\"')
            print(f'\n[[sources]]\nname = "{name}"\ntype = "obsidian"\npath = "{path}"')
    return 0


@command
def cmd_alfred(args: argparse.Namespace) -> int:
    from notewell.launcher import alfred_workflow
    from notewell.ops.agent import record_command

    record_command()
    path = alfred_workflow.build(args.out)
    if args.action == "build":
        print(f"built {path}; `notewell alfred install` opens it in Alfred")
        return 0
    done, message = alfred_workflow.install(path)
    print(message)
    return 0 if done else 1


@command
def cmd_agent(args: argparse.Namespace) -> int:
    from notewell.ops import agent

    try:
        if args.action == "status":
            st = agent.status()
            print(st.describe() + ("" if st.installed else ": `notewell agent install`"))
            return 0 if st.running else 1
        print(getattr(agent, args.action)())
    except agent.AgentError as e:
        print(f"notewell: {e}", file=sys.stderr)
        return 1
    return 0


@command
def cmd_setup(args: argparse.Namespace) -> int:
    from notewell.ops import setup

    def confirm(question: str) -> bool:
        if not sys.stdin.isatty():
            return False
        return input(question).strip().lower() in ("y", "yes")

    return setup.run(args.yes, index=not args.no_index, agent=not args.no_agent,
                     workflow=not args.no_workflow, confirm=confirm, embedder=args.embedder)


@command
def cmd_doctor(args: argparse.Namespace) -> int:
    from notewell.ops import doctor

    checks = doctor.run(embedder=args.embedder)
    for check in checks:
        print(check.line())
    return 1 if doctor.failed(checks) else 0


@command
def cmd_eval(args: argparse.Namespace) -> int:
    from notewell.evaluation import runner as evaluate

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in evaluate.METHODS]
    if unknown or not methods:
        print(f"notewell: unknown method {', '.join(unknown) or '(none)'}; choose from "
              f"{', '.join(evaluate.METHODS)}", file=sys.stderr)
        return 2
    if args.notes and not args.golden:
        print("notewell: --notes goes with --golden FILE", file=sys.stderr)
        return 2
    progress = not args.json
    start = time.monotonic()
    try:
        if args.beir:
            what = f"{args.beir} ({args.split} split)"
            results = evaluate.run_beir(args.beir, args.split, args.embedder(), methods,
                                        progress=progress)
        elif args.golden and args.notes:
            what = f"{args.golden} over {args.notes}"
            results = evaluate.run_folder_golden(args.golden, args.notes, args.embedder(),
                                                 methods, progress=progress)
        elif args.golden:
            what = f"{args.golden} over the configured index"
            engine = _engine(args)
            try:
                results = evaluate.run_golden(args.golden, engine.index, engine.embedder,
                                              methods)
            finally:
                engine.close()
        else:
            what = "the demo golden set over the demo notes"
            from notewell.ops.demo import demo_golden_path, demo_notes_dir

            results = evaluate.run_folder_golden(demo_golden_path(), demo_notes_dir(),
                                                 args.embedder(), methods, name="demo",
                                                 progress=progress)
    except evaluate.EvalError as e:
        print(f"notewell: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(evaluate.to_json(results), indent=2))
        return 0
    print(f"{what}: {time.monotonic() - start:.1f}s")
    print(evaluate.format_table(results))
    return 0


@command
def cmd_mcp(args: argparse.Namespace) -> int:
    if args.action == "install":
        from notewell.ops import mcp_clients

        if not args.client:
            print("notewell: mcp install needs --client claude-desktop|claude-code|cursor",
                  file=sys.stderr)
            return 2
        try:
            print(mcp_clients.install(args.client, dry_run=args.dry_run))
        except mcp_clients.ClientConfigError as e:
            print(f"notewell: {e}", file=sys.stderr)
            return 1
        return 0
    if args.client or args.dry_run:
        print("notewell: --client and --dry-run go with `notewell mcp install`", file=sys.stderr)
        return 2
    from notewell.agents import server

    return server.run(start=not args.no_start, wait=args.wait)
