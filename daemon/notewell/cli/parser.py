"""The argument parser of the ``notewell`` command, and ``--version``."""

from __future__ import annotations

import argparse
import os
import sys

from notewell import __version__
from notewell.wire import paths
from notewell.wire.requests import MAX_LIMIT, MAX_PAGE_CHARS, MAX_RELATED_CHARS, OPS, default

# Commands that must start fast and stay thin: run before main imports anything heavy.
LIGHT_COMMANDS = frozenset({"mcp"})


class _Version(argparse.Action):
    # argparse's own "version" action re-wraps the text to the terminal's width.
    def __call__(self, parser, namespace, values, option_string=None) -> None:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # notewell/
        print(f"notewell {__version__} ({here}, Python {sys.version.split()[0]})")
        parser.exit()


def _limit(s: argparse.ArgumentParser, op: str) -> None:
    s.add_argument("--limit", type=int, default=default(op, "limit", "cli"),
                   help=f"how many notes (default %(default)s, at most {MAX_LIMIT})")


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
                       "Only changed notes are read and only new passages are embedded. When "
                       "the daemon runs, it does the work and its progress is shown here; "
                       "otherwise it is done here, after any other writer has finished.")
    s.add_argument("--rebuild", action="store_true",
                   help="build a fresh index beside the live one and swap it in (needed "
                   "after a model or chunker change)")
    s.add_argument("--quiet", action="store_true", help="no progress bar")

    s = sub.add_parser("sync", help="sync now (through the daemon when it runs)",
                       description="Apply changes in the sources to the index now (the "
                       "daemon does it when it runs, even while it is starting).")
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
    _limit(s, "search")
    s.add_argument("--json", action="store_true", help="print hits as JSON")
    s.add_argument("--mode", choices=OPS["search"]["mode"].choices,
                   default=default("search", "mode", "cli"),
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
    s.add_argument("--max-chars", type=int, default=default("note", "max_chars", "cli"),
                   help="characters per page (default %(default)s, at most "
                   f"{MAX_PAGE_CHARS})")
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
    _limit(s, "recent")
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
    _limit(s, "similar")
    s.add_argument("--json", action="store_true")

    s = sub.add_parser("related", help="notes closest in meaning to any text (an "
                       "argument, stdin, or a file)",
                       description="List the notes closest in meaning to TEXT: the "
                       "argument, or standard input when it is '-' or left out (piped: "
                       "`pbpaste | notewell related`), or the text of a Markdown, text or "
                       "PDF file (--file; a note of a configured source is left out of its "
                       f"own list). At most {MAX_RELATED_CHARS:,} characters are read.")
    s.add_argument("text", nargs="?", help="the text ('-' or none: standard input)")
    s.add_argument("--file", metavar="PATH", help="read the text of this .md, .txt or "
                   ".pdf file instead")
    _limit(s, "related")
    s.add_argument("--source", help="only this source (its configured name)")
    s.add_argument("--tag", action="append", default=[], dest="tags", metavar="TAG",
                   help="only notes with this tag (nested tags included); repeatable")
    s.add_argument("--after", help="modified on or after this date")
    s.add_argument("--before", help="modified before this date")
    s.add_argument("--json", action="store_true", help="print hits as JSON")

    s = sub.add_parser("eval", help="measure ranking quality on a golden set, a BEIR "
                       "dataset or your own notes (Recall@5/@10, MRR@10, nDCG@10)",
                       description="Score the full pipeline (notewell), dense only, BM25 only "
                       "and a naive keyword baseline, overall and per query type. Without "
                       "options: the bundled golden set over the bundled demo notes. --self: "
                       "known-item queries built from your own notes, models side by side. "
                       "Corpora are indexed into reusable throw-away indexes under "
                       "$NOTEWELL_HOME/eval/, so only the first run embeds.")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--golden", metavar="FILE", help="a JSONL golden set ({\"id\", \"query\", "
                   "\"relevant\": [note ids or paths], \"type\"}); scored against the "
                   "configured index unless --notes is given")
    g.add_argument("--beir", metavar="DIR", help="a BEIR dataset directory (corpus.jsonl, "
                   "queries.jsonl, qrels/SPLIT.tsv), indexed as notes (title plus text)")
    g.add_argument("--self", action="store_true", dest="self_eval",
                   help="known-item queries from your own notes (a heading, else a "
                   "sentence, cut out of its note; titles left out), models side by side")
    s.add_argument("--notes", metavar="DIR", help="with --golden or --self: index this "
                   "Markdown folder (throw-away index) instead of the configured sources")
    s.add_argument("--models", metavar="LIST", help="with --self: "
                   "comma-separated models to compare: current (config.toml's), shipped, "
                   "or a model folder (default current)")
    s.add_argument("--queries", type=int, metavar="N",
                   help="with --self: how many queries to build (default 200)")
    s.add_argument("--kinds", metavar="LIST",
                   help="with --self: what a query may be, tried in this order for each "
                   "note: title, heading, sentence (default heading,sentence)")
    s.add_argument("--split", default="test", help="BEIR qrels split (default test)")
    s.add_argument("--methods", help="comma-separated, from notewell, dense, bm25, keyword "
                   "(default all; with --self notewell,dense,bm25)")
    s.add_argument("--json", action="store_true", help="print {method: {group: {metric: "
                   "value}}} as JSON (--self: {queries, notes, types, models: {name: "
                   "{model, methods}}})")
    t = s.add_mutually_exclusive_group()
    t.add_argument("--no-typos", action="store_true", help="without typo correction "
                   "(Ranking(typos=False)): what it changes for queries without typos")
    t.add_argument("--typos", action="store_true", help="score the set clean and with "
                   "seeded typos (English queries: one or two each, on words of four letters "
                   "or more, the same on every machine), typo correction on and off, and "
                   "list the queries ranked worse with it on")

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
                       description="build: write notewell.alfredworkflow (it finds this "
                       "installation through $NOTEWELL_HOME/notewell-command, which this "
                       "writes). install: build it and open it in Alfred (macOS). The "
                       "workflow itself runs `notewell alfred query QUERY` and `notewell "
                       "alfred action ACTION ARG`.")
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
                       description="Without an action: relay the Model Context Protocol "
                       "between stdin/stdout (what an agent's client runs) and a session in "
                       "the daemon, which it starts when it is not running. install: add or "
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
                   help="how long to wait for a daemon being started (default 20)")

    s = sub.add_parser("model", help="the models notewell can use, or switch to one "
                       "(downloaded when you ask)",
                       description="list: the catalog (what each model is for, its size, "
                       "dimension, languages and published retrieval figures; which one "
                       "is in use). use NAME: download NAME from the Hugging Face hub if "
                       "needed (resumable; size and sha256 checked), check that it works, "
                       "rebuild the index beside the live one while the daemon keeps "
                       "answering, write [model] to config.toml and restart the daemon on "
                       "it. `model use all-MiniLM-L6-v2` switches back to the shipped "
                       "model, re-embedding nothing it had. get NAME: download and check "
                       "NAME without switching to it (to compare models with `notewell "
                       "eval --self --models current,NAME`).")
    s.add_argument("action", choices=("list", "use", "get"))
    s.add_argument("name", nargs="?", help="with use or get: the model, as `model list` "
                   "names it")
    s.add_argument("--json", action="store_true", help="with list: machine-readable output")
    s.add_argument("--quiet", action="store_true", help="with use or get: no progress bars")

    sub.add_parser("doctor", help="check each link from the SQLite extension to the Alfred "
                   "workflow, and say what to fix",
                   description="One line per check (ok, FAIL or skip) with the next step for "
                   "each failure; exits 1 if any check failed.")
    return p


