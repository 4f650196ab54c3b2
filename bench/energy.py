"""What an idle daemon costs: CPU seconds and wake-ups per minute, with the watcher on.

    .venv/bin/python bench/energy.py                  # 1,000 notes, 5 idle minutes
    .venv/bin/python bench/energy.py --minutes 1      # shorter
    .venv/bin/python bench/energy.py --real           # the real model instead of the fake

Starts ``notewell serve`` (file-system events on, the default ``--poll``) on a generated
Markdown vault, waits until it has synced and loaded its in-memory copies, lets it settle,
then, without a query or an edit, reads every thread's CPU time (``/proc/PID/stat``:
utime + stime of the whole process) and context switches (``voluntary`` + ``nonvoluntary``
in ``/proc/PID/task/*/status``: each one is the thread waking or being woken) at the start
and end of the idle window. A thread that wakes once a second shows as ~60 a minute.
Target: under 0.05 s of CPU per idle minute, and no thread waking every second. Linux
only (it reads /proc); on macOS, ``top -pid PID -stats pid,cpu,idlew`` shows the same.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

import common

TARGET_CPU_PER_MIN = 0.05  # seconds
WORDS = ["alpha", "bravo", "garden", "kettle", "lisbon", "tram", "postgres", "vacuum",
         "commit", "branch", "rebase", "bread", "flour", "oven", "recipe", "meeting", "notes",
         "budget", "review", "travel", "train", "ticket", "museum", "piano", "scale", "chord",
         "python", "socket", "daemon", "index", "search", "vector", "keyword", "window"]


def write_vault(root: Path, notes: int, seed: int = 28) -> None:
    """``notes`` Markdown notes in folders of 50, a few paragraphs of seeded words each."""
    rng = random.Random(seed)
    for n in range(notes):
        folder = root / f"area-{n // 50:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        paragraphs = [" ".join(rng.choices(WORDS, k=rng.randint(20, 60)))
                      for _ in range(rng.randint(1, 4))]
        tags = " ".join(f"#{t}" for t in rng.sample(WORDS[:8], 2))
        (folder / f"note-{n:04d}.md").write_text(
            f"# Note {n} {rng.choice(WORDS)}\n\n{tags}\n\n" + "\n\n".join(paragraphs) + "\n",
            encoding="utf-8")


def cpu_seconds(pid: int) -> float:
    # Fields after the command's closing parenthesis: utime and stime are the 12th and
    # 13th there (14 and 15 of proc(5)), in clock ticks, for every thread of the process.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def switches(pid: int) -> dict[int, int]:
    """Context switches (voluntary + involuntary) of each live thread, by thread id."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            lines = (task / "status").read_text().splitlines()
        except OSError:  # the thread ended meanwhile
            continue
        out[int(task.name)] = sum(int(line.split()[1]) for line in lines
                                  if line.split(":")[0].endswith("ctxt_switches"))
    return out


def measure(pid: int, seconds: float) -> dict:
    cpu0, sw0, t0 = cpu_seconds(pid), switches(pid), time.monotonic()
    time.sleep(seconds)
    cpu1, sw1, t1 = cpu_seconds(pid), switches(pid), time.monotonic()
    minutes = (t1 - t0) / 60
    per_thread = {tid: (sw1[tid] - sw0.get(tid, 0)) / minutes for tid in sw1}
    return {"minutes": round(minutes, 2), "cpu_s_per_min": round((cpu1 - cpu0) / minutes, 4),
            "wakeups_per_min": round(sum(per_thread.values()), 1),
            "threads": len(sw1), "threads_started": len(set(sw1) - set(sw0)),
            "busiest_threads_per_min": sorted((round(v, 1) for v in per_thread.values()),
                                              reverse=True)[:6]}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=5.0, help="idle minutes measured")
    ap.add_argument("--notes", type=int, default=1000)
    ap.add_argument("--settle", type=float, default=30.0,
                    help="seconds left idle before measuring (the first sync's after-work)")
    ap.add_argument("--real", action="store_true", help="the real model, not the fake one")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    if not Path("/proc/self/stat").exists():
        raise SystemExit("energy.py reads /proc (Linux); on macOS use "
                         "`top -pid PID -stats pid,cpu,idlew` on a running daemon")
    info = common.print_machine("energy: an idle daemon's CPU time and wake-ups")
    with tempfile.TemporaryDirectory() as tmp:
        home, vault = Path(tmp) / "home", Path(tmp) / "vault"
        write_vault(vault, args.notes)
        common.write_config(home, vault)
        daemon = common.DaemonProcess(home, fake=not args.real)
        try:
            copies = daemon.wait_warm(settle=args.settle)
            status = daemon.ask("status")["result"]
            print(f"daemon {daemon.pid}: {args.notes} notes, in-memory copies {copies}, "
                  f"watching {status.get('watching')}")
            print(f"idle for {args.minutes:g} min (no query, no edit) ...", flush=True)
            r = measure(daemon.pid, args.minutes * 60)
        finally:
            daemon.stop()
    ok = r["cpu_s_per_min"] < TARGET_CPU_PER_MIN
    print(f"CPU per idle minute: {r['cpu_s_per_min']:.4f} s (target < {TARGET_CPU_PER_MIN} s: "
          f"{'met' if ok else 'NOT met'})")
    print(f"wake-ups per idle minute, all threads: {r['wakeups_per_min']:.1f} "
          f"({r['threads']} threads, {r['threads_started']} started while idle; busiest "
          f"{r['busiest_threads_per_min']}: 60 a minute is a thread waking every second)")
    return common.finish(args.json, {"machine": info, "notes": args.notes,
                                     "model": "real" if args.real else "fake", **r})


if __name__ == "__main__":
    main()
