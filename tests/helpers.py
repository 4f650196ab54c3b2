"""Helpers the tests share: the small note folder, subprocess environments, a daemon in
a subprocess, running the keystroke client, the MCP client's server parameters and the
daemon's background loop stepped by hand. Fixtures live in ``conftest.py``; tests import
these by name (``from helpers import ...``), never from another test file."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "daemon" / "notewell" / "launcher" / "scripts"
CLIENT = SCRIPTS / "notewell-query"
SHARED = REPO.parent / "shared" / "data"

sys.path.insert(0, str(REPO / "daemon"))

from notewell.model.fake import FakeEmbedder  # noqa: E402
from notewell.wire import client, protocol  # noqa: E402


class RecordingEmbedder(FakeEmbedder):
    """The fake model, keeping every text it was asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed_batch(self, texts: list[str]):
        self.texts.extend(texts)
        return super().embed_batch(texts)


class GatedEmbedder(FakeEmbedder):
    """Blocks inside embed_batch (a long model call) until released, once ``block`` is
    set: whatever answers while ``passed`` is unset did not wait for the sync."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.inside = threading.Event()
        self.passed = threading.Event()
        self.block = False

    def embed_batch(self, texts: list[str]):
        if self.block and len(texts) > 1:  # a sync's batch, not a one-query embedding
            self.inside.set()
            self.gate.wait(30)  # a hang guard: a test that forgets to release fails
            self.passed.set()
        return super().embed_batch(texts)

NOTES = {
    "git/undo-commit.md": "# Undo the last commit\n\nUse `git reset --soft HEAD~1` to undo the "
    "last commit but keep the changes staged.\n\n## Remote branches\n\nDelete a remote branch "
    "with `git push origin --delete name`.\n",
    "db/postgres-vacuum.md": "---\ntags: [postgres, db/maintenance]\n---\n# Postgres vacuum\n\n"
    "Run VACUUM ANALYZE after a bulk delete so the planner statistics stay fresh.\n",
    "kitchen/banana-bread.md": "# Banana bread\n\nThree ripe bananas, flour, sugar, butter. "
    "Bake for an hour at 175C. #recipes #baking\n",
    "travel/lisbon.md": "# Lisbon weekend\n\nTram 28, pastel de nata in Belem, and the "
    "miradouros at sunset. #travel\n",
    "private/secret.md": "# Secret\n\nThe wifi password is hunter2.\n",
}


def write_notes(root: Path, notes: dict[str, str] = NOTES) -> Path:
    for rel, text in notes.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


def write_word_tokenizer(folder: Path, vocab: dict[str, int]) -> None:
    """A word-level ``tokenizer.json`` for the tiny ONNX models tests build: lower-cased,
    split on whitespace, ``[CLS] ... [SEP]`` (ids 2 and 3) around every text."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok.save(str(folder / "tokenizer.json"))


def vectors_by_id(ids, found_and_matrix) -> dict:
    """``Index.vector_matrix`` / ``VectorCache.matrix`` as {id: vector} for assertions."""
    found, matrix = found_and_matrix
    return dict(zip((i for i, f in zip(ids, found) if f), matrix))


def notewell_command(*args: str, fake: bool = True, delay: float = 0.0,
                     record: Path | None = None) -> list[str]:
    """The command line that runs ``notewell ARGS`` in a subprocess: with the fake
    embedder (``notewell.model.fake``, ``delay`` seconds per text, the hash of every
    text embedded appended to ``record``) unless ``fake`` is false."""
    if not fake:
        return [sys.executable, "-m", "notewell", *args]
    recording = ["--record", str(record)] if record else []
    return [sys.executable, "-m", "notewell.model.fake", "--delay", str(delay), *recording,
            *args]


def subprocess_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTEWELL_")}
    env.update(NOTEWELL_HOME=str(home), NOTEWELL_MODEL_DIR=os.environ["NOTEWELL_MODEL_DIR"],
               **extra)
    return env


class DaemonProcess:
    def __init__(self, home: Path, proc: subprocess.Popen, log: Path) -> None:
        self.home, self.proc, self.log = home, proc, log

    def ask(self, op: str, **args) -> dict:
        return client.ask(protocol.request(op, **args), timeout=10)

    def stop(self) -> int:
        from notewell.ops.demo import stop_daemon

        stop_daemon(self.proc)
        return self.proc.returncode


def start_daemon(home: Path, *, fake: bool = True, poll: float = 0.5, timeout: float = 60,
                 delay: float = 0.0, record: Path | None = None) -> DaemonProcess:
    log = home / "daemon-test.log"
    env = subprocess_env(home)
    env["PYTHONPATH"] = str(REPO / "daemon")
    with open(log, "ab") as f:
        proc = subprocess.Popen(notewell_command("serve", "--poll", str(poll), fake=fake,
                                                 delay=delay, record=record),
                                env=env, stdout=f, stderr=f, stdin=subprocess.DEVNULL)
    d = DaemonProcess(home, proc, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            reply = d.ask("ping")
            if reply["ok"] and reply["result"]["state"] == "ready":
                return d
        except (OSError, protocol.ProtocolError):
            pass
        time.sleep(0.05)
    d.stop()
    raise RuntimeError(f"daemon not ready in {timeout}s: {log.read_text()[-2000:]}")


def wait_synced(d: DaemonProcess, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = d.ask("status")["result"]
        if status.get("notes", 0) > 0 and status.get("last_sync"):
            return
        time.sleep(0.05)
    raise RuntimeError("daemon never finished its first sync")


def run_client(home: Path, *args: str, timeout: float = 10) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-IS", str(CLIENT), *args], capture_output=True,
                          env=subprocess_env(home), timeout=timeout, check=False)


def modules_loaded_by_client(home: Path, *args: str) -> set[str]:
    """The modules one run of the client script adds to a bare ``python -IS``."""
    # exec, not runpy: runpy itself imports typing and re when it runs a path; and the
    # script's final ``posix._exit`` becomes a SystemExit so the probe can report.
    probe = (
        "import sys, posix\n"
        "def _exit(code):\n"
        "    raise SystemExit(code)\n"
        "posix._exit = _exit\n"
        "before = set(sys.modules)\n"
        f"sys.argv = [{str(CLIENT)!r}, *{list(args)!r}]\n"
        f"code = compile(open({str(CLIENT)!r}).read(), {str(CLIENT)!r}, 'exec')\n"
        "try:\n"
        f"    exec(code, {{'__name__': '__main__', '__file__': {str(CLIENT)!r}}})\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run([sys.executable, "-IS", "-c", probe], capture_output=True,
                         env={"NOTEWELL_HOME": str(home), "PATH": "/usr/bin:/bin"},
                         timeout=10, check=True)
    return set(out.stderr.decode().split())


def server_params(home: Path, *extra: str, python_c: str | None = None
                  ):
    """How the MCP SDK's client starts `notewell mcp` (or ``python -c python_c``) with
    this checkout."""
    from mcp import StdioServerParameters

    env = subprocess_env(home)
    env["PYTHONPATH"] = str(REPO / "daemon")
    args = ["-c", python_c] if python_c else ["-m", "notewell", "mcp", "--no-start", *extra]
    return StdioServerParameters(command=sys.executable, args=args, env=env)


@contextlib.contextmanager
def stepped_background(tmp_path: Path, folder: Path, clock,
                       **options) -> Iterator:
    """The daemon's background loop with its first sync done, stepped by the test (as its
    thread would be when woken) on a fake clock."""
    from notewell.config import Config, SourceConfig
    from notewell.engine import Engine
    from notewell.serve.background import Background

    cfg = Config(sources=(SourceConfig("notes", "markdown", str(folder)),))
    engine = Engine(cfg, embedder=FakeEmbedder(), index_dir=str(tmp_path / "idx"))
    bg = Background(lambda: engine, threading.Event(), use_events=False, clock=clock, **options)
    assert bg.start_engine()
    bg.start_watching()
    assert bg.watcher is not None
    try:
        bg.request_sync()
        bg.step()
        yield bg
    finally:
        bg.watcher.stop()
        engine.close()


class FakeListener:
    """A socket listening at ``path`` where a daemon would, each connection handed to
    ``serve`` on a thread of its own, until ``close``."""

    def __init__(self, path: str, serve: Callable[[socket.socket], None]) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self._handle = serve
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self._handle(conn)

    def close(self) -> None:
        self.sock.close()
