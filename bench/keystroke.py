"""Keystroke latency: the real per-keystroke client against a warm daemon, process start to
JSON printed, next to a bare ``python3 -I -S -c pass`` measured in the same run.

    .venv/bin/python bench/keystroke.py            # the Dendron vault, real model
    .venv/bin/python bench/keystroke.py --fake --notes 30 --runs 10   # smoke run

What it prints, each as p50 / p95 over ``--runs`` or more runs:
- bare interpreter: ``python -I -S -c pass`` (the floor for any Python client);
- zsh client (notewell/launcher/scripts/notewell-query.zsh, what the Alfred workflow runs)
  and Python client (notewell-query beside it, its fallback), each against its own
  freshly started daemon:
  - typing: each prefix of a few queries, as Alfred sends them while one types (every
    keystroke a new query: model, k-NN, BM25 and rendering in the daemon);
  - repeat: the same query again (the daemon's prepared answer);
- in-process round trip: the same keystrokes sent from a process that is already running
  (its own fresh daemon too), which is what a launcher extension talking to the socket
  directly (Raycast) pays;
- one-shot: ``notewell search`` with no daemon, which loads the model and the index for
  one query, as tools without a daemon do.
Bare and client runs alternate, so both see the same machine load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

TYPED = ["daily journal template", "publish notes to github pages", "lookup hierarchy",
         "refactor a vault", "schema"]
REPEAT = "daily journal template"


def prefixes(queries: list[str], limit: int) -> list[str]:
    out = [q[:i] for q in queries for i in range(2, len(q) + 1)]
    return out[:limit] if limit else out


def dendron_home(fake: bool, notes: int) -> tuple[Path, int, int]:
    """(home, notes, chunks) of an index of the Dendron vault (or its first ``notes``)."""
    source = common.shared_data() / "dendron-vault" / "notes"
    if not source.is_dir():
        raise SystemExit(f"{source} is missing: this benchmark indexes the Dendron vault "
                         "from ../shared/data (or set NOTEWELL_BENCH_DATA)")
    if fake or notes:
        root = Path(tempfile.mkdtemp(prefix="notewell-keystroke-"))
        folder = root / "notes"
        folder.mkdir()
        for f in sorted(source.glob("*.md"))[: notes or None]:
            shutil.copy(f, folder / f.name)
    else:
        root = common.cache_dir() / "keystroke-dendron"
        folder = source
    home = root / "home"
    marker = home / "built.txt"
    if not marker.exists():
        if fake:
            from notewell.model.fake import FakeEmbedder

            embedder = FakeEmbedder()
        else:
            embedder = common.BenchEmbedder()
        counts = common.index_corpus(home, folder, embedder, name="dendron")
        marker.write_text(f"{counts['notes']} {counts['chunks']}")
    n_notes, n_chunks = map(int, marker.read_text().split())
    return home, n_notes, n_chunks


def run_once(cmd: list[str], env: dict) -> tuple[float, bytes]:
    start = time.perf_counter()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                         check=False)
    return (time.perf_counter() - start) * 1000, out.stdout


def typing_and_repeat(cmd: list[str], env: dict, typed: list[str], bare_cmd: list[str],
                      bare: list[float]) -> dict[str, list[float]]:
    """Each typed prefix once (new queries), then the same query again and again; a bare
    interpreter start before each run, so both see the same machine load."""
    for q in ("warm", "warm up", "warm up the cache"):  # not among the timed ones
        run_once([*cmd, q], env)
    typing, repeat = [], []
    for q in typed:
        bare.append(run_once(bare_cmd, env)[0])
        ms, out = run_once([*cmd, q], env)
        if b'"items"' not in out:
            raise SystemExit(f"{cmd[-1]} printed no Alfred JSON for {q!r}: {out[:200]!r}")
        typing.append(ms)
    for _ in range(len(typed)):
        bare.append(run_once(bare_cmd, env)[0])
        repeat.append(run_once([*cmd, REPEAT], env)[0])
    return {"typing": typing, "repeat": repeat}


def in_process(daemon: common.DaemonProcess, typed: list[str]) -> dict[str, list[float]]:
    """The same keystrokes from a process that is already running (a launcher extension)."""

    def ask(q: str) -> None:
        daemon.ask("search", query=q, format="alfred")

    for q in ("warm", "warm up", "warm up the cache"):
        ask(q)
    typing = []
    for q in typed:
        start = time.perf_counter()
        ask(q)
        typing.append((time.perf_counter() - start) * 1000)
    return {"typing": typing, "repeat": common.timed(lambda: ask(REPEAT), len(typed))}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=60, help="keystrokes to time (at least 50)")
    ap.add_argument("--oneshot-runs", type=int, default=5)
    ap.add_argument("--fake", action="store_true", help="fake embedder (smoke test)")
    ap.add_argument("--notes", type=int, default=0, help="index only the first N notes")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    info = common.print_machine("keystroke: client wall time against a warm daemon")
    home, n_notes, n_chunks = dendron_home(args.fake, args.notes)
    print(f"index: Dendron vault, {n_notes} notes, {n_chunks} chunks"
          f"{' (fake embedder)' if args.fake else ''}")
    scripts = common.REPO / "daemon" / "notewell" / "launcher" / "scripts"
    if not scripts.is_dir():  # a checkout from before issue 17 (bench/compare.py --old)
        scripts = common.REPO / "client"
    client = str(scripts / "notewell-query")
    env = {"NOTEWELL_HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    bare_cmd = [sys.executable, "-I", "-S", "-c", "pass"]
    # Keys name the figures: client_typing, zsh_repeat, inprocess_typing, ...
    clients = {"client": ([sys.executable, "-IS", client], env)}
    zsh = shutil.which("zsh")
    if zsh:
        # NOTEWELL_PYTHON=false: a run that fell back to Python would print nothing and stop
        # the benchmark, so every zsh figure is the zsh path's own.
        clients["zsh"] = ([zsh, "-f", client + ".zsh"], {**env, "NOTEWELL_PYTHON": "/bin/false"})
    else:
        print("zsh not found: the zsh client is not measured")
    typed = prefixes(TYPED, args.runs)
    bare: list[float] = []
    timings: dict[str, dict[str, list[float]]] = {}
    for name in (*clients, "inprocess"):
        # A daemon per client: the same keystrokes, each time on cold caches.
        daemon = common.DaemonProcess(home, fake=args.fake)
        try:
            daemon.wait_warm()
            timings[name] = (in_process(daemon, typed) if name == "inprocess" else
                             typing_and_repeat(*clients[name], typed, bare_cmd, bare))
        finally:
            daemon.stop()
    # One-shot: the CLI with no daemon loads the model and the index for each query.
    oneshot = []
    cli_env = {**daemon.env}  # the daemons' environment (home, embedder), none running now
    for q in (TYPED * args.oneshot_runs)[: args.oneshot_runs]:
        oneshot.append(run_once([sys.executable, "-m", "notewell", "search", q, "--limit",
                                 "20"], cli_env)[0])
    res = {"machine": info, "notes": n_notes, "chunks": n_chunks, "fake": args.fake,
           "bare": common.pct(bare), "oneshot": common.pct(oneshot)}
    b = res["bare"]["p50"]
    for name, runs in timings.items():
        for kind, ms in runs.items():
            res[f"{name}_{kind}"] = common.pct(ms)
            res[f"ratio_{name}_{kind}"] = round(res[f"{name}_{kind}"]["p50"] / b, 2)
    res["oneshot_speedup"] = round(res["oneshot"]["p50"] / res["client_typing"]["p50"], 1)
    print(f"bare python -I -S -c pass:   {common.fmt(res['bare'])}")
    if "zsh" in timings:
        res["oneshot_speedup_zsh"] = round(res["oneshot"]["p50"] / res["zsh_typing"]["p50"], 1)
        print(f"zsh client, typing (new):    {common.fmt(res['zsh_typing'])}  "
              f"= {res['ratio_zsh_typing']}x bare  (what Alfred runs)")
        print(f"zsh client, repeated query:  {common.fmt(res['zsh_repeat'])}  "
              f"= {res['ratio_zsh_repeat']}x bare")
    print(f"python client, typing (new): {common.fmt(res['client_typing'])}  "
          f"= {res['ratio_client_typing']}x bare")
    print(f"python client, repeated:     {common.fmt(res['client_repeat'])}  "
          f"= {res['ratio_client_repeat']}x bare")
    print(f"in-process round trip, new:  {common.fmt(res['inprocess_typing'])}  "
          "(a launcher extension on the socket)")
    print(f"in-process round trip, repeat: {common.fmt(res['inprocess_repeat'])}")
    print(f"one-shot `notewell search`:  {common.fmt(res['oneshot'])}  "
          f"= {res['oneshot_speedup']}x the Python client"
          + (f", {res['oneshot_speedup_zsh']}x the zsh client" if "zsh" in timings else ""))
    # From the repeated query: the daemon's prepared answer, the same work in both runs.
    over = res["client_repeat"]["p50"] - b - res["inprocess_repeat"]["p50"]
    print(f"client cost beyond interpreter start and daemon work: {over:.2f} ms "
          "(repeated query)")
    print(common.load_note())
    common.write_json(args.json, res)
    if args.fake or args.notes:
        shutil.rmtree(home.parent, ignore_errors=True)
    return res


if __name__ == "__main__":
    main()
