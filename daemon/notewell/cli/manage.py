"""The commands that build, serve and set up: demo, index, sync, serve, vaults, alfred,
agent, setup, doctor, model, eval, mcp."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from notewell.cli.common import (
    command,
    load_config,
    one_shot_engine,
    print_report,
    say_waiting,
    update_index,
)


@command
def cmd_demo(args: argparse.Namespace) -> int:
    from notewell.ops.demo import run_demo

    return run_demo(args.queries or None)


@command
def cmd_index(args: argparse.Namespace) -> int:
    config = load_config()
    if not config.sources:
        print(f"notewell: no sources in {config.path}; add a [[sources]] table "
              "(README, \"Configuration\") or run `notewell setup`", file=sys.stderr)
        return 1
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


@command
def cmd_sync(args: argparse.Namespace) -> int:
    reports = update_index(args, rebuild=False, quiet=args.json, who="notewell sync")
    if args.json:
        print(json.dumps(reports, indent=2))
    else:
        for r in reports:
            print_report(r)
    return 1 if any(r.get("error") for r in reports) else 0


@command
def cmd_serve(args: argparse.Namespace) -> int:
    from notewell.engine import Engine
    from notewell.ops.agent import record_command
    from notewell.serve.daemon import run

    record_command()  # where Raycast finds this installation to start the daemon
    return run(load_config(), poll_seconds=args.poll,
               engine_factory=lambda cfg: Engine(cfg, embedder=args.embedder()))




@command
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
        print(f"notewell: `notewell model {args.action} NAME`: which model? "
              "(`notewell model list`)", file=sys.stderr)
        return 2
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


@command
def cmd_eval(args: argparse.Namespace) -> int:
    from notewell.evaluation import runner as evaluate
    from notewell.search.ranking import Ranking

    default = "notewell,dense,bm25" if args.self_eval else ",".join(evaluate.METHODS)
    methods = [m.strip() for m in (args.methods or default).split(",") if m.strip()]
    unknown = [m for m in methods if m not in evaluate.METHODS]
    if unknown or not methods:
        print(f"notewell: unknown method {', '.join(unknown) or '(none)'}; choose from "
              f"{', '.join(evaluate.METHODS)}", file=sys.stderr)
        return 2
    if args.notes and not (args.golden or args.self_eval):
        print("notewell: --notes goes with --golden FILE or --self", file=sys.stderr)
        return 2
    if not args.self_eval and (args.models, args.queries, args.kinds) != (None, None, None):
        print("notewell: --models, --queries and --kinds go with --self", file=sys.stderr)
        return 2
    if args.self_eval and args.typos:
        print("notewell: --typos goes with the demo set, --golden FILE or --beir DIR, not "
              "--self", file=sys.stderr)
        return 2
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
        elif args.golden and args.notes:
            what = f"{args.golden} over {args.notes}"
            results = evaluate.run_folder_golden(args.golden, args.notes, args.embedder(),
                                                 methods, ranking, progress=progress,
                                                 judge=judge)
        elif args.golden:
            what = f"{args.golden} over the configured index"
            engine = one_shot_engine(args)
            try:
                results = evaluate.run_golden(args.golden, engine.index, engine.embedder,
                                              methods, ranking, judge)
            finally:
                engine.close()
        else:
            what = "the demo golden set over the demo notes"
            from notewell.ops.demo import demo_golden_path, demo_notes_dir

            results = evaluate.run_folder_golden(demo_golden_path(), demo_notes_dir(),
                                                 args.embedder(), methods, ranking,
                                                 name="demo", progress=progress, judge=judge)
    except evaluate.EvalError as e:
        print(f"notewell: {e}", file=sys.stderr)
        return 1
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
        print("notewell: --self wants --models with at least one model, --queries of 1 or "
              f"more and --kinds from {', '.join(known_items.KIND_NAMES)}", file=sys.stderr)
        return 2
    start = time.monotonic()
    try:
        models = [(spec, self_eval.model_for(spec, args.embedder)) for spec in specs]
        if args.notes:
            source = folder_source(args.notes)
            configs = [source.config]
            sources = [source]
            what = args.notes
        else:
            config = load_config()
            configs = list(config.sources)
            if not configs:
                print(f"notewell: no sources in {config.path}; pass --notes DIR, or add a "
                      "[[sources]] table (see README, \"Configuration\")", file=sys.stderr)
                return 1
            sources = [open_source(c) for c in configs]
            what = ", ".join(c.name for c in configs)
        notes = known_items.read_notes(sources)
        result = self_eval.run_self(notes, models, self_eval.corpus_key(configs),
                                    count, methods, ranking, progress=not args.json,
                                    kinds=kinds)
    except EvalError as e:
        print(f"notewell: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(self_eval.to_json(result), indent=2))
        return 0
    print(f"your notes ({what}): {time.monotonic() - start:.1f}s")
    print(self_eval.format_table(result))
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
        if not args.dry_run:  # the daemon loads the MCP server at start from now on
            from notewell.wire import paths

            paths.write_atomic(paths.mcp_marker(), args.client.encode())
        return 0
    if args.client or args.dry_run:
        print("notewell: --client and --dry-run go with `notewell mcp install`", file=sys.stderr)
        return 2
    from notewell.agents import relay

    return relay.run(start=not args.no_start, wait=args.wait)
