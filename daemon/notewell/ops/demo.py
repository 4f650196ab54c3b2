"""``notewell demo``: the whole path on the bundled demo corpus, offline.

Writes a config for the demo notes (unless the home already has another config), builds
the index with a progress bar, starts the daemon as a child process, runs example queries
through the real per-keystroke client, prints the Alfred JSON, and stops the daemon.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

from notewell import config
from notewell.wire import paths

EXAMPLES = [
    "faucet dripping",  # paraphrase: the note says "tap" and "washer"
    "undo broken release",  # paraphrase of a rollback how-to
    "postg",  # prefix while typing
    "#recipes bread",  # a tag filter
]


CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "demo_corpus")


def demo_notes_dir() -> str:
    return os.path.join(CORPUS, "notes")


def demo_golden_path() -> str:
    """The demo corpus's golden queries (``notewell eval`` runs them by default)."""
    return os.path.join(CORPUS, "golden.jsonl")


def demo_config() -> config.Config:
    return config.Config(sources=(config.SourceConfig(
        name="demo", type="markdown", path=demo_notes_dir(), exclude=("private/**",)),))


def client_command() -> list[str]:
    """The client as the Alfred workflow runs it: the package's zsh client (when zsh is
    here), else its Python client with -IS."""
    from notewell.launcher.alfred_workflow import this_installation

    inst = this_installation()
    zsh = shutil.which("zsh")
    if inst.fast_client and zsh:
        return [zsh, "-f", inst.fast_client]
    return [sys.executable, "-IS", inst.client]


def ensure_config() -> config.Config:
    current = config.load()
    if current.sources and not any(s.name == "demo" for s in current.sources):
        raise SystemExit(
            f"notewell: {current.path} already configures other sources; run the demo with "
            "a separate home, e.g. NOTEWELL_HOME=/tmp/notewell-demo notewell demo")
    config.save(demo_config())
    return config.load()


def run_demo(queries: list[str] | None = None) -> int:
    from notewell.engine import Engine

    print(f"notewell demo · home {paths.home()}")
    cfg = ensure_config()
    print(f"config: {cfg.path} (source 'demo' = {demo_notes_dir()}, excluding private/**)")
    engine = Engine(cfg)
    start = time.monotonic()
    for r in engine.sync(progress=True):
        print(f"indexed {r.source}: {r.added} added, {r.updated} updated, {r.unchanged} "
              f"unchanged, {r.embedded} passages and titles embedded in "
              f"{time.monotonic() - start:.1f}s")
    with engine.reading() as view:
        status = view.status()
    engine.close()
    print(f"index: {status['notes']} notes, {status['chunks']} chunks, model {status['model']}")

    log_path = os.path.join(paths.home(), "demo-daemon.log")
    with open(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as log:
        daemon = subprocess.Popen([sys.executable, "-m", "notewell", "serve"],
                                  stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        if not wait_ready(timeout=60):
            print(f"notewell: the daemon did not become ready; see {log_path}", file=sys.stderr)
            return 1
        print(f"daemon: pid {daemon.pid}, socket {paths.socket_path()}")
        command = client_command()
        for q in queries or EXAMPLES:
            t0 = time.perf_counter()
            out = subprocess.run([*command, q], capture_output=True, check=False,
                                 env={**os.environ, "NOTEWELL_PYTHON": sys.executable})
            ms = (time.perf_counter() - t0) * 1000
            doc = json.loads(out.stdout)
            print(f"\n$ {os.path.basename(command[-1])} {q!r}   ({ms:.0f} ms, "
                  f"{len(doc['items'])} items)")
            for item in doc["items"][:5]:
                print(f"  - {item['title']}  ·  {item.get('subtitle', '')[:90]}")
            shown = dict(doc, items=doc["items"][:2])
            print(json.dumps(shown, indent=2, ensure_ascii=False))
    finally:
        stop_daemon(daemon)
    print("\ndaemon stopped. Next: `notewell setup` finds your own notes and sets up the rest.")
    return 0


def wait_ready(timeout: float) -> bool:
    from notewell.wire import client, protocol

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            reply = client.ask(protocol.request("ping"))
            if reply.get("ok") and reply["result"].get("state") == "ready":
                return True
        except (OSError, protocol.ProtocolError):
            pass
        time.sleep(0.1)
    return False


def stop_daemon(proc: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
