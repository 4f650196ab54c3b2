"""MCP as an agent's client sees it: ``notewell mcp`` (the stdio relay) to a session the
warm daemon hosts, on the Dendron vault: start-up to the answer to ``tools/list``,
``search_notes`` round trips, memory per session and the daemon's one-time growth for the
SDK, the keystroke path's latency while agents search; the size of a typical answer; an
example session.

    .venv/bin/python bench/mcp.py                       # the Dendron vault, real model
    .venv/bin/python bench/mcp.py --fake --notes 30 --starts 3 --queries 10   # smoke run

What it prints:
- the daemon's one-time growth for the MCP SDK: its resident memory before any session
  and after the first one (which loads the SDK) has closed;
- start-up, launch to the ``tools/list`` answer (initialize, initialized, tools/list, as a
  client sends them, over the process's own pipes), p50 / p95 over ``--starts`` runs; and
  where that time goes, measured alternately in the same run: a bare ``python -c pass``,
  ``import notewell.agents.relay`` (the interpreter plus the relay's imports, without the
  interpreter's exit, which a session's timing does not include either), and the rest
  (connecting, the switch to MCP, the session's handshake in the daemon);
- memory per connected session: ``--sessions`` relays kept open (each after a search):
  a relay's resident memory plus the daemon's growth divided by the sessions;
- the keystroke path (the daemon's ``search`` op for Alfred, prefixes of new queries)
  idle, and while those sessions run ``search_notes`` in a loop;
- ``search_notes`` round trip, request line written to response line read, over
  ``--queries`` distinct queries (new searches, no prepared answer) in one session; next
  to the same queries asked of the daemon directly (``search`` op, what the MCP layer
  adds is the difference);
- the size of a typical ``search_notes`` answer (8 hits): characters and tokens of the text
  block, and of the whole JSON result (text plus structured content), tokens counted with
  the model's WordPiece tokenizer and as characters / 4;
- an example session: search, then ``get_note`` on the first hit (``--transcript FILE``
  writes it out).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import common
import keystroke

PROTOCOL = "2025-06-18"


class Session:
    """``notewell mcp`` over its pipes, spoken to line by line as a client would."""

    def __init__(self, env: dict[str, str]) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "notewell", "mcp", "--no-start"], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.next_id = 0

    def send(self, message: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                   **({"params": params} if params is not None else {})})
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"notewell mcp closed its output during {method}")
        reply = json.loads(line)
        if "error" in reply:
            raise SystemExit(f"{method}: {reply['error']}")
        return reply["result"]

    def handshake(self) -> list[dict]:
        self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self.request("tools/list")["tools"]

    def call(self, name: str, arguments: dict) -> dict:
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError"):
            raise SystemExit(f"{name}: {result['content'][0]['text']}")
        return result

    def close(self) -> float:
        """End the session; the CPU seconds the process used (user + system)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                return usage.ru_utime + usage.ru_stime
            time.sleep(0.01)
        self.proc.kill()
        self.proc.wait()
        return float("nan")


def run_ms(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall milliseconds and CPU milliseconds (user + system) of one run of ``cmd``."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    return wall, cpu


def startup(env: dict[str, str], runs: int) -> dict[str, list[float]]:
    """Launch to tools/list, alternating with the bare interpreter and the imports; wall
    time, and CPU time, which other processes' load changes less."""
    keys = ("bare", "imports", "tools_list")
    out: dict[str, list[float]] = {k: [] for k in (*keys, *(k + "_cpu" for k in keys))}
    # os._exit: a session is timed to its tools/list answer, before any exit, so the
    # imports are timed without the interpreter's teardown (~0.3 s of freeing models).
    code = "import {}, os; os._exit(0)"
    for i in range(runs + 1):  # the first round warms the file cache and .pyc files
        bare = run_ms([sys.executable, "-c", "pass"], env)
        imports = run_ms([sys.executable, "-c", code.format("notewell.agents.relay")], env)
        s = Session(env)
        tools = s.handshake()
        listed = (time.perf_counter() - s.started) * 1000
        cpu = s.close() * 1000  # the whole session: start-up, then an immediate exit
        if len(tools) != 6:
            raise SystemExit(f"tools/list gave {len(tools)} tools")
        if i:
            for key, (wall, used) in (("bare", bare), ("imports", imports),
                                      ("tools_list", (listed, cpu))):
                out[key].append(wall)
                out[key + "_cpu"].append(used)
    return out


def memory_per_session(daemon: common.DaemonProcess, env: dict[str, str], n: int,
                       queries: list[str]) -> tuple[dict, list[Session]]:
    """``n`` sessions opened and kept: the relay's RSS and the daemon's growth per
    session (MB); the sessions, still open."""
    before = common.rss_mb(daemon.pid)[0]
    sessions = []
    for i in range(n):
        s = Session(env)
        s.handshake()
        s.call("search_notes", {"query": queries[i % len(queries)]})
        sessions.append(s)
    grown = common.rss_mb(daemon.pid)[0] - before
    relays = [common.rss_mb(s.proc.pid)[0] for s in sessions]
    relay = sum(relays) / len(relays)
    return {"sessions": n, "relay_rss_mb": round(relay, 1),
            "daemon_growth_mb": round(grown / n, 2),
            "per_session_mb": round(relay + grown / n, 1)}, sessions


def keystrokes_while(daemon: common.DaemonProcess, sessions: list[Session],
                     typed: list[str]) -> dict[str, list[float]]:
    """The keystroke path idle, then while every session runs search_notes in a loop;
    alternating would let the loops' start and stop blur both, so idle comes first."""
    import threading

    def keystrokes() -> list[float]:
        out = []
        for q in typed:
            t = time.perf_counter()
            reply = daemon.ask("search", query=q, format="alfred")
            out.append((time.perf_counter() - t) * 1000)
            if not reply.get("ok"):
                raise SystemExit(f"keystroke search failed: {reply}")
        return out

    idle = keystrokes()
    stop = threading.Event()
    calls = [0] * len(sessions)

    def agent(i: int) -> None:
        n = 0
        while not stop.is_set():
            sessions[i].call("search_notes", {"query": f"{typed[n % len(typed)]} agent {i}"})
            n += 1
        calls[i] = n

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(len(sessions))]
    for t in threads:
        t.start()
    try:
        busy = keystrokes()
    finally:
        stop.set()
        for t in threads:
            t.join()
    return {"idle": idle, "busy": busy, "agent_calls": [float(sum(calls))]}


def tokens(text: str) -> int:
    """Tokens of ``text`` by the model's WordPiece tokenizer (close to, not the same as,
    an agent model's own)."""
    from notewell.model.files import locate_model_files
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(locate_model_files().tokenizer)
    tok.no_truncation()
    return len(tok.encode(text, add_special_tokens=False).ids)


def size(result: dict) -> dict:
    text = "\n".join(c["text"] for c in result["content"] if c["type"] == "text")
    whole = json.dumps(result, ensure_ascii=False)
    return {"text_chars": len(text), "text_tokens": tokens(text),
            "text_chars_div4": round(len(text) / 4), "json_chars": len(whole),
            "json_tokens": tokens(whole), "json_chars_div4": round(len(whole) / 4)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--starts", type=int, default=20, help="start-ups to time")
    ap.add_argument("--queries", type=int, default=60, help="search_notes calls to time")
    ap.add_argument("--sessions", type=int, default=4, help="sessions kept open for the "
                    "memory and the keystrokes-while-agents-search figures")
    ap.add_argument("--fake", action="store_true", help="fake embedder (smoke test)")
    ap.add_argument("--notes", type=int, default=0, help="index only the first N notes")
    ap.add_argument("--folder", help="index this Markdown folder instead of the Dendron "
                    "vault (e.g. the demo corpus, for the real model when building the "
                    "vault's index would take too long)")
    ap.add_argument("--embed-real", action="store_true", help="with --fake: also time the "
                    "real model embedding the same queries in this process (what a real "
                    "daemon adds to each search over the fake embedder's cost)")
    ap.add_argument("--transcript", help="write the example session to this file")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    info = common.print_machine("mcp: notewell mcp over stdio against a warm daemon")
    if args.folder:
        import tempfile

        home = Path(tempfile.mkdtemp(prefix="notewell-mcp-")) / "home"
        embedder = None
        if args.fake:
            from notewell.model.fake import FakeEmbedder

            embedder = FakeEmbedder()
        else:
            embedder = common.BenchEmbedder()
        counts = common.index_corpus(home, Path(args.folder), embedder, name="folder")
        n_notes, n_chunks = counts["notes"], counts["chunks"]
        where = args.folder
    else:
        home, n_notes, n_chunks = keystroke.dendron_home(args.fake, args.notes)
        where = "Dendron vault"
    print(f"index: {where}, {n_notes} notes, {n_chunks} chunks"
          f"{' (fake embedder)' if args.fake else ''}")
    daemon = common.DaemonProcess(home, fake=args.fake)
    try:
        daemon.wait_warm()
        env = {**daemon.env}
        queries = common.queries(args.queries)
        # The daemon's one-time growth: before any session, and after the first (which
        # loads the SDK) has closed.
        rss_before = common.rss_mb(daemon.pid)[0]
        opener = Session(env)
        opener.handshake()
        opener.call("search_notes", {"query": "warm"})
        opener.close()
        sdk_growth = common.rss_mb(daemon.pid)[0] - rss_before
        start = startup(env, args.starts)
        session = Session(env)
        session.handshake()
        for q in ("warm", "warm up", "warm up the cache"):
            session.call("search_notes", {"query": q})
        via_mcp, direct = [], []
        for q in queries:  # alternately, so both see the same load; all new searches
            t = time.perf_counter()
            session.call("search_notes", {"query": q})
            via_mcp.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            daemon.ask("search", query=f"{q} notes", limit=8)
            direct.append((time.perf_counter() - t) * 1000)
        memory, kept = memory_per_session(daemon, env, args.sessions, queries)
        typed = keystroke.prefixes([f"{q} typed" for q in queries], args.queries)
        try:
            keys = keystrokes_while(daemon, kept, typed)
        finally:
            for each in kept:
                each.close()
        example_query = queries[0] if args.folder else "publish notes to github pages"
        found = session.call("search_notes", {"query": example_query})
        first = found["structuredContent"]["hits"][0]["note_id"]
        note = session.call("get_note", {"note_id": first, "max_chars": 2000})
        session.close()
    finally:
        daemon.stop()
    embed: list[float] = []
    if args.fake and args.embed_real:
        from notewell.model.runtime import default_embedder

        model = default_embedder()
        texts = iter(queries * 2)  # new texts each time: no cached vector
        embed = common.timed(lambda: model.embed_batch([next(texts)]), len(queries))
    res = {"machine": info, "notes": n_notes, "chunks": n_chunks, "fake": args.fake,
           "sdk_growth_mb": round(sdk_growth, 1), "memory": memory,
           "keystroke_idle": common.pct(keys["idle"]),
           "keystroke_with_agents": common.pct(keys["busy"]),
           "agent_calls_meanwhile": int(keys["agent_calls"][0]),
           "startup": {k: common.pct(v) for k, v in start.items()},
           "search_notes": common.pct(via_mcp), "daemon_search": common.pct(direct),
           "answer_size": size(found), "note_size": size(note),
           "real_query_embedding": common.pct(embed)}
    s = res["startup"]
    print(f"start-up to tools/list:      {common.fmt(s['tools_list'])}  (targets p50 150, "
          "p95 300 ms)")
    print(f"  bare python -c pass:       {common.fmt(s['bare'])}")
    print(f"  + the relay's imports:     p50 {s['imports']['p50'] - s['bare']['p50']:.0f} ms "
          f"(import notewell.agents.relay: {common.fmt(s['imports'])})")
    print(f"  + connect, switch, session handshake in the daemon: p50 "
          f"{s['tools_list']['p50'] - s['imports']['p50']:.0f} ms")
    print(f"  CPU time (user + system):  bare p50 {s['bare_cpu']['p50']:.0f} ms, imports "
          f"p50 {s['imports_cpu']['p50']:.0f} ms, whole relay to tools/list and exit "
          f"p50 {s['tools_list_cpu']['p50']:.0f} ms")
    m = res["memory"]
    print(f"daemon's one-time growth for the MCP SDK: {res['sdk_growth_mb']:.1f} MB")
    print(f"memory per session ({m['sessions']} open): relay {m['relay_rss_mb']:.1f} MB + "
          f"daemon {m['daemon_growth_mb']:.2f} MB = {m['per_session_mb']:.1f} MB  "
          "(target <= 15 MB)")
    print(f"keystroke search op, idle:   {common.fmt(res['keystroke_idle'])}")
    print(f"  while {m['sessions']} sessions search in a loop: "
          f"{common.fmt(res['keystroke_with_agents'])} "
          f"({res['agent_calls_meanwhile']} search_notes calls meanwhile)")
    print(f"search_notes via stdio:      {common.fmt(res['search_notes'])}  (through the "
          "relay; target p50 <= 25 ms)")
    print(f"daemon search op directly:   {common.fmt(res['daemon_search'])}  (the same "
          "queries plus a word, alternated)")
    if embed:
        e = res["real_query_embedding"]
        print(f"real model, one query's embedding: {common.fmt(e)}  (a real daemon's search "
              f"adds this to the fake embedder's: about p50 "
              f"{res['search_notes']['p50'] + e['p50']:.1f} ms via stdio)")
    a = res["answer_size"]
    print(f"search_notes answer, 8 hits: text {a['text_chars']} chars = {a['text_tokens']} "
          f"WordPiece tokens (chars/4: {a['text_chars_div4']}); whole JSON result "
          f"{a['json_chars']} chars = {a['json_tokens']} tokens (chars/4: "
          f"{a['json_chars_div4']})")
    transcript = (f"> search_notes(query={example_query!r})\n"
                  + "\n".join(c["text"] for c in found["content"])
                  + f"\n\n> get_note(note_id={first!r}, max_chars=2000)\n"
                  + "\n".join(c["text"] for c in note["content"]))
    print("example session:\n" + "\n".join("  " + line for line in transcript.splitlines()))
    if args.transcript:
        Path(args.transcript).write_text(transcript + "\n", encoding="utf-8")
    print(common.load_note())
    common.write_json(args.json, res)
    if args.fake or args.notes or args.folder:
        import shutil

        shutil.rmtree(home.parent, ignore_errors=True)
    return res


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
