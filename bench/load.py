"""Load: several clients query a daemon as fast as they can for a fixed time while the
corpus under it keeps changing and syncs keep running; every answer is checked.

Each client opens a connection per query, as the per-keystroke client does, asks for a
note by its unique marker word and checks that the note comes first. A writer edits,
adds and deletes other notes all the while and asks the daemon to sync. Reports requests,
errors, wrong answers, p50/p99/max latency, syncs completed and the daemon's RSS before
and after. Exit status 1 on any error or wrong answer.

    .venv/bin/python bench/load.py                 # 10 s, 4 clients, fake embedder
    .venv/bin/python bench/load.py --real --seconds 30
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import random
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "daemon"))

from notewell import config  # noqa: E402
from notewell.ops.demo import stop_daemon  # noqa: E402
from notewell.wire import client, protocol  # noqa: E402

STABLE_PREFIX, CHURN_PREFIX = "s", "c"
WORDS = (
    "river", "stone", "lantern", "orchard", "copper", "meadow", "harbor", "violet", "summit",
    "cedar", "falcon", "ember", "glacier", "hollow", "juniper", "kettle", "linen", "marble",
)


def stable_note(i: int) -> str:
    """A note about one marker word, so its right answer does not depend on the
    embedder: BM25 finds it alone, and its vector is the marker's (with the fake one)."""
    marker = f"ks{i}q"
    return f"# {marker}\n\n{' '.join([marker] * 12)}.\n"


def churn_note(j: int, version: int) -> str:
    rng = random.Random(j * 7919 + version)
    body = " ".join(rng.choice(WORDS) for _ in range(80))
    return f"# Churn {j} v{version}\n\n{body}\n\n## More\n\n{body.upper()}\n"


def rss_kb(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (Linux /proc, else ``ps``)."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    out = subprocess.run(["ps", "-o", "rss=", "-p", str(pid)], capture_output=True, text=True)
    return int(out.stdout.strip() or 0)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))]


@dataclass
class LoadResult:
    seconds: float
    clients: int
    requests: int = 0
    errors: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    syncs: int = 0
    edits: int = 0
    rss_before_kb: int = 0
    rss_after_kb: int = 0
    rss_quarters_kb: list[int] = field(default_factory=list)  # at 25, 50, 75, 100 % of the run
    index_problems: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        ms = [x * 1000 for x in self.latencies]
        return {
            "seconds": self.seconds, "clients": self.clients, "requests": self.requests,
            "per_second": round(self.requests / self.seconds, 1),
            "errors": len(self.errors), "wrong_answers": len(self.wrong),
            "p50_ms": round(percentile(ms, 50), 2), "p99_ms": round(percentile(ms, 99), 2),
            "max_ms": round(max(ms, default=float("nan")), 2),
            "syncs_completed": self.syncs, "note_edits": self.edits,
            "rss_before_mb": round(self.rss_before_kb / 1024, 1),
            "rss_after_mb": round(self.rss_after_kb / 1024, 1),
            "rss_quarters_mb": [round(x / 1024, 1) for x in self.rss_quarters_kb],
            "index_problems": len(self.index_problems),
        }


def _ask(op: str, timeout: float = 5.0, **args) -> dict:
    return client.ask(protocol.request(op, **args), timeout=timeout)


def run_load(home: Path, notes_dir: Path, *, seconds: float = 10.0, clients: int = 4,
             stable: int = 150, churn: int = 60, real: bool = False,
             embed_delay: float = 0.002) -> LoadResult:
    """Start a daemon on a fresh corpus under ``home`` and load it; see the module doc."""
    os.environ["NOTEWELL_HOME"] = str(home)
    home.mkdir(parents=True, exist_ok=True)
    notes_dir.mkdir(parents=True, exist_ok=True)
    for i in range(stable):
        (notes_dir / f"{STABLE_PREFIX}{i:04d}.md").write_text(stable_note(i))
    versions = {j: 0 for j in range(churn)}
    for j in versions:
        (notes_dir / f"{CHURN_PREFIX}{j:04d}.md").write_text(churn_note(j, 0))
    config.save(config.Config(sources=(config.SourceConfig("notes", "markdown",
                                                           str(notes_dir)),)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTEWELL_")}
    env.update(NOTEWELL_HOME=str(home), PYTHONPATH=str(REPO / "daemon"))
    # notewell.model.fake: the test-only entry point with the fake embedder.
    command = ([sys.executable, "-m", "notewell"] if real else
               [sys.executable, "-m", "notewell.model.fake", "--delay", str(embed_delay)])
    log = open(home / "load-daemon.log", "ab")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen([*command, "serve", "--poll", "0.5"],
                            env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    result = LoadResult(seconds, clients)
    try:
        _wait_ready(proc, stable + churn)
        # The right answer is the marker's own note. The real model cannot tell made-up
        # markers apart (ks27q and ks37q embed alike) and ties then go by note id, so
        # there the right answer is what the quiet daemon said before the load began.
        expected = {(i, end): f"notes:{STABLE_PREFIX}{i:04d}.md"
                    for i in range(stable) for end in ("", " ")}
        if real:
            for i, end in expected:
                hits = _ask("search", query=f"ks{i}q{end}", limit=3)["result"]["hits"]
                expected[i, end] = hits[0]["note_id"] if hits else ""
        result.rss_before_kb = rss_kb(proc.pid)
        stop = threading.Event()
        lock = threading.Lock()

        def query_loop(seed: int) -> None:
            rng = random.Random(seed)
            while not stop.is_set():
                i = rng.randrange(stable)
                end = rng.choice(("", " "))  # still typing, or done
                typed = f"ks{i}q{end}"
                start = time.perf_counter()
                try:
                    reply = _ask("search", query=typed, limit=3)
                except Exception as e:
                    with lock:
                        result.errors.append(f"{type(e).__name__}: {e}")
                    continue
                took = time.perf_counter() - start
                with lock:
                    result.requests += 1
                    result.latencies.append(took)
                    if not reply.get("ok"):
                        result.errors.append(str(reply.get("error")))
                        continue
                    hits = reply["result"]["hits"]
                    if not hits or hits[0]["note_id"] != expected[i, end]:
                        result.wrong.append(f"{typed!r} -> {[h['note_id'] for h in hits[:2]]}"
                                            f", expected {expected[i, end]}")

        def writer() -> None:
            rng = random.Random(99)
            while not stop.is_set():
                for _ in range(rng.randint(2, 6)):
                    j = rng.randrange(churn)
                    path = notes_dir / f"{CHURN_PREFIX}{j:04d}.md"
                    if path.exists() and rng.random() < 0.15:
                        path.unlink()
                    else:
                        versions[j] += 1
                        path.write_text(churn_note(j, versions[j]))
                    result.edits += 1
                with contextlib.suppress(Exception):
                    if _ask("sync_now", timeout=60).get("ok"):
                        result.syncs += 1

        threads = [threading.Thread(target=query_loop, args=(n,)) for n in range(clients)]
        threads.append(threading.Thread(target=writer))
        for t in threads:
            t.start()
        for _ in range(4):  # memory over the run: a leak climbs, a warm-up levels off
            time.sleep(seconds / 4)
            result.rss_quarters_kb.append(rss_kb(proc.pid))
        stop.set()
        for t in threads:
            t.join(timeout=120)
        result.rss_after_kb = rss_kb(proc.pid)
    finally:
        stop_daemon(proc, timeout=20)
        log.close()
    result.index_problems = _index_problems(home, real)
    return result


def _wait_ready(proc: subprocess.Popen, notes: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited with {proc.returncode}")
        with contextlib.suppress(OSError, protocol.ProtocolError):
            status = _ask("status")
            if status.get("ok") and status["result"].get("notes") == notes \
                    and status["result"].get("last_sync"):
                return
        time.sleep(0.1)
    raise RuntimeError("the daemon did not index the corpus in time")


def _index_problems(home: Path, real: bool) -> list[str]:
    from notewell.index import store
    from notewell.index.database import Index
    from notewell.index.schema import BuildSettings
    from notewell.ingest.chunking import ChunkSettings
    from notewell.model.embedding import SHIPPED_FINGERPRINT
    from notewell.model.fake import FakeEmbedder
    from notewell.model.files import DIM

    fake = FakeEmbedder()
    embedder_id = SHIPPED_FINGERPRINT if real else fake.fingerprint()
    settings = BuildSettings(embedder_id, DIM if real else fake.dim,
                             ChunkSettings().fingerprint())
    index = Index(store.current_path(str(home / "index")), settings)
    try:
        return index.consistency_problems()
    finally:
        index.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--stable", type=int, default=150, help="notes that are queried")
    p.add_argument("--churn", type=int, default=60, help="notes that keep changing")
    p.add_argument("--real", action="store_true", help="the real model (default: fake)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="notewell-load-") as tmp:
        r = run_load(Path(tmp) / "home", Path(tmp) / "notes", seconds=args.seconds,
                     clients=args.clients, stable=args.stable, churn=args.churn,
                     real=args.real)
    s = r.summary()
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, {platform.system()}; embedder: "
          f"{'real' if args.real else 'fake'}")
    print(f"{s['clients']} clients for {s['seconds']:g} s while syncing a changing corpus: "
          f"{s['requests']} queries ({s['per_second']}/s), {s['errors']} errors, "
          f"{s['wrong_answers']} wrong answers")
    print(f"latency: p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms, max {s['max_ms']} ms")
    print(f"syncs completed: {s['syncs_completed']} ({s['note_edits']} note edits); "
          f"index problems afterwards: {s['index_problems']}")
    print(f"daemon RSS: {s['rss_before_mb']} MB before; at 25/50/75/100 % of the run "
          f"{' / '.join(str(x) for x in s['rss_quarters_mb'])} MB; "
          f"{s['rss_after_mb']} MB after")
    for line in (r.errors + r.wrong + r.index_problems)[:10]:
        print("  " + line)
    return 1 if r.errors or r.wrong or r.index_problems else 0


if __name__ == "__main__":
    sys.exit(main())
