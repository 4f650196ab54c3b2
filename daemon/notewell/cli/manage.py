"""The commands that build, serve and set up: demo, index, sync, serve, vaults, alfred,
agent, setup, doctor, model, eval, mcp."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from notewell.cli.common import (
    arg,
    command,
    fail,
    load_config,
    one_of,
    one_shot_engine,
    print_report,
    say_waiting,
    update_index,
)


@command(help="index the bundled demo notes, start the daemon, run example queries "
         "through the real client, stop",
         description="Set up a demo: writes a config for the bundled demo corpus, indexes "
         "it, starts the daemon, runs example queries through the per-keystroke client and "
         "prints the Alfred JSON, then stops.",
         arguments=(arg("queries", nargs="*", help="queries to run instead of the examples"),))
def cmd_demo(args: argparse.Namespace) -> int:
    from notewell.ops.demo import run_demo

    return run_demo(args.queries or None)


@command(help="build or update the index (with a progress bar)",
         description="Bring the index up to date with every configured source. Only changed "
         "notes are read and only new passages are embedded. When the daemon runs, it does "
         "the work and its progress is shown here; otherwise it is done here, after any "
         "other writer has finished.",
         arguments=(arg("--rebuild", action="store_true", help="build a fresh index beside "
                        "the live one and swap it in (needed after a model or chunker change)"),
                    arg("--quiet", action="store_true", help="no progress bar")))
def cmd_index(args: argparse.Namespace) -> int:
    config = load_config()
    if not config.sources:
        return fail(f"no sources in {config.path}; add a [[sources]] table "
                    "(README, \"Configuration\") or run `notewell setup`")
    start = time.monotonic()
    reports = update_index(args, rebuild=args.rebuild, quiet=args.quiet,
                           who="notewell index --rebuild" if args.rebuild else "notewell index")
    # An unreadable folder's notes are carried over from the live index: published.
    if args.rebuild and any(r.get("error") and not r.get("carried_all") for r in reports):
        print("notewell: not rebuilt, the live index is unchanged: a source could not "
              "be read (below); fix it, or remove it from config.toml, and run again",
              file=sys.stderr)
    for r in reports:
        print_report(r)
    print(f"done in {time.monotonic() - start:.1f}s")
    return 1 if any(r.get("error") for r in reports) else 0


@command(help="sync now (through the daemon when it runs)",
         description="Apply changes in the sources to the index now (the daemon does it when "
         "it runs, even while it is starting).",
         arguments=(arg("--json", action="store_true", help="print the sync reports as JSON"),))
def cmd_sync(args: argparse.Namespace) -> int:
    reports = update_index(args, rebuild=False, quiet=args.json, who="notewell sync")
    if args.json:
        print(json.dumps(reports, indent=2))
    else:
        for r in reports:
            print_report(r)
    return 1 if any(r.get("error") for r in reports) else 0


@command(help="run the daemon in the foreground (what launchd runs)",
         description="Run the daemon: load the model and index, answer on the socket, keep "
         "the index in sync. Stops cleanly on SIGTERM.",
         arguments=(arg("--poll", type=float, default=5.0, metavar="SECONDS",
                        help="how often to poll sources that file-system events do not cover "
                        "(default 5); Bear is checked every second"),))
def cmd_serve(args: argparse.Namespace) -> int:
    from notewell.engine import Engine
    from notewell.ops.login_agent import record_command
    from notewell.serve.daemon import run

    record_command()  # where Raycast finds this installation to start the daemon
    return run(load_config(), poll_seconds=args.poll,
               engine_factory=lambda cfg: Engine(cfg, embedder=args.embedder()))


@command(help="list the Obsidian vaults Obsidian knows about",
         description="List the vaults in Obsidian's own registry (obsidian.json), mark those "
         "already configured, and print a [[sources]] table for each of the others.",
         arguments=(arg("--registry", metavar="PATH",
                        help="read this obsidian.json instead of Obsidian's own"),
                    arg("--json", action="store_true", help="machine-readable output")))
def cmd_vaults(args: argparse.Namespace) -> int:
    from notewell.sources.obsidian import list_vaults

    vaults = list_vaults(args.registry)
    configured = {s.path for s in load_config().sources if s.type == "obsidian"}
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


@command(help="build the Alfred workflow for this installation, or open it in Alfred",
         description="build: write notewell.alfredworkflow (it finds this installation "
         "through $NOTEWELL_HOME/notewell-command, which this writes). install: build it and "
         "open it in Alfred (macOS). The workflow itself runs `notewell alfred query QUERY` "
         "and `notewell alfred action ACTION ARG`.",
         arguments=(arg("action", choices=("build", "install")),
                    arg("--out", metavar="PATH", help="where to write the .alfredworkflow "
                        "(default: $NOTEWELL_HOME/alfred/notewell.alfredworkflow)")))
def cmd_alfred(args: argparse.Namespace) -> int:
    from notewell.launcher import alfred_workflow
    from notewell.ops.login_agent import record_command

    record_command()
    path = alfred_workflow.build(args.out)
    if args.action == "build":
        print(f"built {path}; `notewell alfred install` opens it in Alfred")
        return 0
    done, message = alfred_workflow.install(path)
    print(message)
    return 0 if done else 1


@command(help="start the daemon at login and keep it running (launchd on macOS, "
         "systemd --user on Linux)",
         description="install: write the LaunchAgent (or systemd user unit) for this "
         "installation and start it. uninstall: stop and remove it. status, start, stop, "
         "restart: what they say.",
         arguments=(arg("action", choices=("install", "uninstall", "status", "start", "stop",
                                           "restart")),))
def cmd_agent(args: argparse.Namespace) -> int:
    from notewell.ops import login_agent as agent

    try:
        if args.action == "status":
            st = agent.status()
            print(st.describe() + ("" if st.installed else ": `notewell agent install`"))
            return 0 if st.running else 1
        print(getattr(agent, args.action)())
    except agent.AgentError as e:
        return fail(str(e))
    return 0


@command(help="find Bear and Obsidian notes, write the config, index, install the "
         "agent and the Alfred workflow",
         description="Find Bear's database and Obsidian's vaults, propose a config that "
         "keeps the sources already configured, and with --yes write it, build the index, "
         "install the agent and build the Alfred workflow. Safe to run again.",
         arguments=(arg("--yes", action="store_true", help="do it without asking"),
                    arg("--no-index", action="store_true", help="skip building the index"),
                    arg("--no-agent", action="store_true", help="skip installing the agent"),
                    arg("--no-workflow", action="store_true", help="skip the Alfred workflow")))
def cmd_setup(args: argparse.Namespace) -> int:
    from notewell.ops import setup

    def confirm(question: str) -> bool:
        if not sys.stdin.isatty():
            return False
        return input(question).strip().lower() in ("y", "yes")

    return setup.run(args.yes, index=not args.no_index, agent=not args.no_agent,
                     workflow=not args.no_workflow, confirm=confirm, embedder=args.embedder)


@command(help="check each link from the SQLite extension to the Alfred workflow, and "
         "say what to fix",
         description="One line per check (ok, FAIL or skip) with the next step for each "
         "failure; exits 1 if any check failed.")
def cmd_doctor(args: argparse.Namespace) -> int:
    from notewell.ops import doctor

    checks = doctor.run(embedder=args.embedder)
    for check in checks:
        print(check.line())
    return 1 if doctor.failed(checks) else 0


@command(help="the models notewell can use, or switch to one (downloaded when you ask)",
         description="list: the catalog (what each model is for, its size, dimension, "
         "languages and published retrieval figures; which one is in use). use NAME: "
         "download NAME from the Hugging Face hub if needed (resumable; size and sha256 "
         "checked), check that it works, rebuild the index beside the live one while the "
         "daemon keeps answering, write [model] to config.toml and restart the daemon on it. "
         "`model use all-MiniLM-L6-v2` switches back to the shipped model, re-embedding "
         "nothing it had. get NAME: download and check NAME without switching to it (to "
         "compare models with `notewell eval --self --models current,NAME`).",
         arguments=(arg("action", choices=("list", "use", "get")),
                    arg("name", nargs="?",
                        help="with use or get: the model, as `model list` names it"),
                    arg("--json", action="store_true", help="with list: machine-readable output"),
                    arg("--quiet", action="store_true", help="with use or get: no progress bars")))
def cmd_model(args: argparse.Namespace) -> int:
    from notewell.ops import models

    if args.action == "list":
        found = models.list_models()
        if args.json:
            print(json.dumps(found, indent=2, ensure_ascii=False))
            return 0
        for m in found:
            print_model(m)
        print("Switch with `notewell model use NAME` (a download only when you run it).")
        return 0
    if not args.name:
        return fail(f"`notewell model {args.action} NAME`: which model? "
                    "(`notewell model list`)", 2)
    bars = sys.stderr.isatty() and not args.quiet  # progress on a terminal only

    def byte_bar(label: str, total: int):
        from notewell.ingest.progress import Progress

        if total >= 1_000_000:
            return Progress(label, total, unit="MB", scale=1e6)
        return Progress(label, total, unit="kB", scale=1e3)

    try:
        if args.action == "get":
            folder = models.get(args.name, download_progress=byte_bar if bars else None)
            print(f"{args.name} is ready" + (f" in {folder}" if folder else " (shipped)")
                  + f"; compare: notewell eval --self --models current,{args.name}")
            return 0
        done = models.use(args.name, download_progress=byte_bar if bars else None,
                          progress=bars, on_wait=say_waiting)
    except KeyboardInterrupt:
        print("\nnotewell: interrupted: nothing was switched; run the command again to "
              "resume the download", file=sys.stderr)
        return 130
    if done["already"]:
        print(f"{args.name} is in use already and the index is built with it")
        return 0
    for r in done["reports"]:
        print_report(r)
    print(f"switched to {args.name}" + (f" ({done['folder']})" if done["folder"] else ""))
    if done["replaced"]:
        print(f"[model] named your own model before ({done['replaced']}); its vectors are "
              "kept: name it again in config.toml and `notewell index --rebuild` to go back")
    daemon = done["daemon"]
    if daemon is None:
        print("no daemon is running; the next one starts on this model")
    elif daemon["state"] == "ready":
        print("the daemon restarted on it")
    else:
        print(f"the daemon is {daemon['state']}"
              + (f": {daemon['problem']}" if daemon.get("problem") else "")
              + "; `notewell status` and `notewell doctor` say more", file=sys.stderr)
        return 1
    return 0


def print_model(m: dict) -> None:
    size = f"{m['bytes'] / 1e6:,.0f} MB"
    if m["in_use"]:
        state = "in use"
    elif m["installed"]:
        state = "shipped" if m["shipped"] else "downloaded"
    else:
        state = f"not downloaded, {size}"
    print(f"{m['name']} ({state})")
    window = f"reads {m['window']} tokens"
    if m["max_tokens"] != m["window"]:
        window += f" (passages cut for {m['max_tokens']})"
    print(f"  {m['languages']}; {m['dim']} dimensions; {window}; {m['pooling']} pooling; "
          f"{size}" + ("; shipped with notewell" if m["shipped"] else ""))
    print(f"  for: {m['purpose']}")
    print(f"  published: {m['figures']}")
    if m["source"]:
        print(f"  from: {m['source']}")
    for name, digest in sorted(m["sha256"].items()):
        print(f"  sha256 {name}: {digest}")


@command(help="measure ranking quality on a golden set, a BEIR dataset or your own "
         "notes (Recall@5/@10, MRR@10, nDCG@10)",
         description="Score the full pipeline (notewell), dense only, BM25 only and a naive "
         "keyword baseline, overall and per query type. Without options: the bundled golden "
         "set over the bundled demo notes. --self: known-item queries built from your own "
         "notes, models side by side. Corpora are indexed into reusable throw-away indexes "
         "under $NOTEWELL_HOME/eval/, so only the first run embeds.",
         arguments=(
             one_of(arg("--golden", metavar="FILE", help="a JSONL golden set ({\"id\", "
                        "\"query\", \"relevant\": [note ids or paths], \"type\"}); scored "
                        "against the configured index unless --notes is given"),
                    arg("--beir", metavar="DIR", help="a BEIR dataset directory "
                        "(corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv), indexed as notes "
                        "(title plus text)"),
                    arg("--self", action="store_true", dest="self_eval",
                        help="known-item queries from your own notes (a heading, else a "
                        "sentence, cut out of its note; titles left out), models side by "
                        "side")),
             arg("--notes", metavar="DIR", help="with --golden or --self: index this Markdown "
                 "folder (throw-away index) instead of the configured sources"),
             arg("--models", metavar="LIST", help="with --self: comma-separated models to "
                 "compare: current (config.toml's), shipped, or a model folder (default "
                 "current)"),
             arg("--queries", type=int, metavar="N",
                 help="with --self: how many queries to build (default 200)"),
             arg("--kinds", metavar="LIST", help="with --self: what a query may be, tried in "
                 "this order for each note: title, heading, sentence (default "
                 "heading,sentence)"),
             arg("--split", default="test", help="BEIR qrels split (default test)"),
             arg("--methods", help="comma-separated, from notewell, dense, bm25, keyword "
                 "(default all; with --self notewell,dense,bm25)"),
             arg("--json", action="store_true", help="print {method: {group: {metric: "
                 "value}}} as JSON (--self: {queries, notes, types, models: {name: "
                 "{model, methods}}})"),
             one_of(arg("--no-typos", action="store_true", help="without typo correction "
                        "(Ranking(typos=False)): what it changes for queries without typos"),
                    arg("--typos", action="store_true", help="score the set clean and with "
                        "seeded typos (English queries: one or two each, on words of four "
                        "letters or more, the same on every machine), typo correction on "
                        "and off, and list the queries ranked worse with it on"))))
def cmd_eval(args: argparse.Namespace) -> int:
    from notewell.evaluation import runner as evaluate
    from notewell.search.ranking import Ranking

    default = "notewell,dense,bm25" if args.self_eval else ",".join(evaluate.METHODS)
    methods = [m.strip() for m in (args.methods or default).split(",") if m.strip()]
    unknown = [m for m in methods if m not in evaluate.METHODS]
    if unknown or not methods:
        return fail(f"unknown method {', '.join(unknown) or '(none)'}; choose from "
                    f"{', '.join(evaluate.METHODS)}", 2)
    if args.notes and not (args.golden or args.self_eval):
        return fail("--notes goes with --golden FILE or --self", 2)
    if not args.self_eval and (args.models, args.queries, args.kinds) != (None, None, None):
        return fail("--models, --queries and --kinds go with --self", 2)
    if args.self_eval and args.typos:
        return fail("--typos goes with the demo set, --golden FILE or --beir DIR, not --self",
                    2)
    progress = not args.json
    ranking = Ranking(typos=False) if args.no_typos else None
    if args.self_eval:
        return _eval_self(args, methods, ranking)
    judge = None
    if args.typos:
        from notewell.evaluation import typos

        judge = typos.compare
    start = time.monotonic()
    try:
        if args.beir:
            what = f"{args.beir} ({args.split} split)"
            results = evaluate.run_beir(args.beir, args.split, args.embedder(), methods,
                                        ranking, progress, judge)
        elif args.golden and not args.notes:
            what = f"{args.golden} over the configured index"
            engine = one_shot_engine(args)
            try:
                results = evaluate.run_golden(args.golden, engine.index, engine.embedder,
                                              methods, ranking, judge)
            finally:
                engine.close()
        else:  # a golden set over a folder: the one given, or the demo's
            from notewell.ops.demo import demo_golden_path, demo_notes_dir

            what = (f"{args.golden} over {args.notes}" if args.golden
                    else "the demo golden set over the demo notes")
            results = evaluate.run_folder_golden(
                args.golden or demo_golden_path(), args.notes or demo_notes_dir(),
                args.embedder(), methods, ranking, name="notes" if args.golden else "demo",
                progress=progress, judge=judge)
    except evaluate.EvalError as e:
        return fail(str(e))
    if args.json:
        print(json.dumps(typos.to_json(results) if args.typos else evaluate.to_json(results),
                         indent=2))
        return 0
    print(f"{what}: {time.monotonic() - start:.1f}s")
    print(typos.format_comparison(results) if args.typos else evaluate.format_table(results))
    return 0


def _eval_self(args: argparse.Namespace, methods: list[str], ranking) -> int:
    """``notewell eval --self``: known items from the configured sources or ``--notes``."""
    from notewell.evaluation import known_items, self_eval
    from notewell.evaluation.corpora import folder_source
    from notewell.evaluation.metrics import EvalError
    from notewell.sources import open_source

    specs = list(dict.fromkeys(m.strip() for m in (args.models or "current").split(",")
                               if m.strip()))
    kinds = [k.strip() for k in (args.kinds or ",".join(known_items.KINDS)).split(",")
             if k.strip()]
    count = known_items.QUERIES if args.queries is None else args.queries
    if not specs or count < 1 or not kinds or set(kinds) - set(known_items.KIND_NAMES):
        return fail("--self wants --models with at least one model, --queries of 1 or more "
                    f"and --kinds from {', '.join(known_items.KIND_NAMES)}", 2)
    start = time.monotonic()
    try:
        models = [(spec, self_eval.model_for(spec, args.embedder)) for spec in specs]
        if args.notes:
            sources = [folder_source(args.notes)]
            configs, what = [sources[0].config], args.notes
        else:
            config = load_config()
            configs = list(config.sources)
            if not configs:
                return fail(f"no sources in {config.path}; pass --notes DIR, or add a "
                            "[[sources]] table (see README, \"Configuration\")")
            sources = [open_source(c) for c in configs]
            what = ", ".join(c.name for c in configs)
        notes = known_items.read_notes(sources)
        result = self_eval.run_self(notes, models, self_eval.corpus_key(configs),
                                    count, methods, ranking, progress=not args.json,
                                    kinds=kinds)
    except EvalError as e:
        return fail(str(e))
    if args.json:
        print(json.dumps(self_eval.to_json(result), indent=2))
        return 0
    print(f"your notes ({what}): {time.monotonic() - start:.1f}s")
    print(self_eval.format_table(result))
    return 0


@command(help="the MCP server for AI agents (stdio), or `mcp install` to add it to "
         "Claude Desktop, Claude Code or Cursor",
         description="Without an action: relay the Model Context Protocol between "
         "stdin/stdout (what an agent's client runs) and a session in the daemon, which it "
         "starts when it is not running. install: add or update the notewell entry in a "
         "client's configuration.",
         arguments=(arg("action", nargs="?", choices=("install",),
                        help="install: add notewell to --client's configuration"),
                    arg("--client", choices=("claude-desktop", "claude-code", "cursor"),
                        help="with install: which client"),
                    arg("--dry-run", action="store_true",
                        help="with install: print the change, change nothing"),
                    arg("--no-start", action="store_true",
                        help="never start the daemon; tools report that it is down"),
                    arg("--wait", type=float, default=20.0, metavar="SECONDS",
                        help="how long to wait for a daemon being started (default 20)")),
         light=True)  # an agent's client starts it: it stays thin
def cmd_mcp(args: argparse.Namespace) -> int:
    if args.action == "install":
        from notewell.ops import mcp_clients

        if not args.client:
            return fail("mcp install needs --client claude-desktop|claude-code|cursor", 2)
        try:
            print(mcp_clients.install(args.client, dry_run=args.dry_run))
        except mcp_clients.ClientConfigError as e:
            return fail(str(e))
        if not args.dry_run:  # the daemon loads the MCP server at start from now on
            from notewell.wire import paths

            paths.write_atomic(paths.mcp_marker(), args.client.encode())
        return 0
    if args.client or args.dry_run:
        return fail("--client and --dry-run go with `notewell mcp install`", 2)
    from notewell.agents import relay

    return relay.run(start=not args.no_start, wait=args.wait)
