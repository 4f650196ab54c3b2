"""What every benchmark shares: the machine report, percentiles, corpora and their vectors.

Corpora are built from ``../shared/data`` (``NOTEWELL_BENCH_DATA`` overrides): the Dendron
vault, the TIL notes and the SciFact abstracts, in that order, cut at a number of chunks.
Sizes above the real texts (about 10,000 chunks) are *synthetic*: the base notes are
written again with a marker in the title (``Title ⁂7``), and each copy's vector is its
original's real vector plus Gaussian noise (cosine about 0.9 to the original), so that
the vectors keep the real model's geometry (clusters, a common direction) while every
chunk has its own vector. ``--vectors random`` swaps in uniformly random unit vectors.

Every corpus is a Markdown folder indexed through notewell's own sync path into a
``NOTEWELL_HOME`` with a ``config.toml``, so the daemon can be started on it as is. Real
vectors come from the real model once and are kept by text hash in the cache folder
(``NOTEWELL_BENCH_CACHE``, default ``~/.cache/notewell-bench``); nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import platform
import re
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "daemon"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SIZES = {"1k": 1_000, "5k": 5_000, "10k": 10_000, "100k": 100_000, "1m": 1_000_000}


def parse_sizes(spec: str) -> list[str | int]:
    """``--sizes 10k,100k,2500``: named corpora stay names, anything else is a count."""
    return [s if s in SIZES else int(s) for s in (p.strip() for p in spec.split(","))]
REAL_LIMIT = 10_000  # real chunks used at most; larger sizes are synthetic copies of them
COPY_MARK = re.compile(r" ⁂\d+")
COPY_NOISE = 0.025  # per dimension: cosine(copy, original) ≈ 1 / sqrt(1 + 384 * 0.025²) ≈ 0.9


def shared_data() -> Path:
    return Path(os.environ.get("NOTEWELL_BENCH_DATA") or REPO.parent / "shared" / "data")


def cache_dir() -> Path:
    root = Path(os.environ.get("NOTEWELL_BENCH_CACHE")
                or Path.home() / ".cache" / "notewell-bench")
    root.mkdir(parents=True, exist_ok=True)
    return root


# Bench daemons and this process share one model rewrite (notewell.model.rewrite).
os.environ.setdefault("NOTEWELL_MODEL_DIR", str(cache_dir() / "runtime-models"))


def prepare_model(environ: dict[str, str]) -> None:
    """Build and choose the model file before a daemon starts, in a process of its own, so
    that no measured daemon pays for the one-time choice (or keeps its memory)."""
    import subprocess

    if not any(Path(os.environ["NOTEWELL_MODEL_DIR"]).glob("*.json")):
        subprocess.run([sys.executable, "-c", "from notewell.model.runtime import "
                        "default_embedder; default_embedder()"], env=environ, check=True)


# -- the machine ------------------------------------------------------------------------------


def machine() -> dict:
    """CPU, cores, memory, OS and the versions that decide the numbers."""
    import apsw
    import onnxruntime

    cpu = platform.processor() or platform.machine()
    ram = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram = int(line.split()[1]) * 1024
    if sys.platform == "darwin":
        import subprocess

        def sysctl(key: str) -> str:
            return subprocess.run(["sysctl", "-n", key], capture_output=True,
                                  text=True).stdout.strip()

        cpu = sysctl("machdep.cpu.brand_string") or cpu
        ram = int(sysctl("hw.memsize") or 0)
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gb": round(ram / 2**30, 1),
        "os": platform.platform(terse=True),
        "python": platform.python_version(),
        "onnxruntime": onnxruntime.__version__,
        "numpy": np.__version__,
        "sqlite": apsw.sqlite_lib_version(),
        "sqlite_vec": _sqlite_vec_version(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }


def _sqlite_vec_version() -> str:
    import sqlite_vec

    return getattr(sqlite_vec, "__version__", "?")


def print_machine(title: str, info: dict | None = None) -> dict:
    info = info or machine()
    print(f"== {title}")
    print(f"machine: {info['cpu']}, {info['cores']} cores, {info['ram_gb']} GB RAM, "
          f"{info['os']}")
    print(f"software: Python {info['python']}, onnxruntime {info['onnxruntime']}, numpy "
          f"{info['numpy']}, SQLite {info['sqlite']}, sqlite-vec {info['sqlite_vec']}")
    print(f"load average at start: {info['load_avg']} (figures taken under other load "
          "are slower than on a quiet machine)")
    return info


def load_note() -> str:
    """One line to print at the end: the load while the benchmark ran."""
    return f"load average at end: {[round(x, 2) for x in os.getloadavg()]}"


def pct(values: list[float]) -> dict:
    """p50/p95/mean of a list of milliseconds (nearest-rank percentiles)."""
    xs = sorted(values)
    if not xs:
        return {"n": 0, "p50": 0.0, "p95": 0.0, "mean": 0.0}

    def rank(p: float) -> float:
        return xs[min(len(xs) - 1, max(0, math.ceil(p * len(xs)) - 1))]

    return {"n": len(xs), "p50": round(rank(0.50), 3), "p95": round(rank(0.95), 3),
            "mean": round(statistics.fmean(xs), 3)}


def fmt(p: dict, unit: str = "ms") -> str:
    return f"p50 {p['p50']:.2f} {unit}, p95 {p['p95']:.2f} {unit} (n={p['n']})"


def timed(fn: Callable[[], object], runs: int, warmup: int = 2) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def rss_mb(pid: int | None = None) -> tuple[float, float]:
    """(current, peak) resident set size of a process in MB, from /proc (Linux) or ps."""
    pid = pid or os.getpid()
    status = Path(f"/proc/{pid}/status")
    if status.exists():
        fields = {}
        for line in status.read_text().splitlines():
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        cur = int(fields["VmRSS"].split()[0]) / 1024
        return cur, int(fields.get("VmHWM", fields["VmRSS"]).split()[0]) / 1024
    import subprocess

    out = subprocess.run(["ps", "-o", "rss=", "-p", str(pid)], capture_output=True,
                         text=True).stdout.split()
    cur = int(out[0]) / 1024 if out else 0.0
    return cur, cur


# -- texts --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BaseNote:
    key: str
    title: str
    text: str


def base_notes() -> Iterator[BaseNote]:
    """Dendron, then TIL, then SciFact: title and Markdown body of each note, in order."""
    from notewell.config import SourceConfig
    from notewell.sources import open_source

    data = shared_data()
    for name, folder in (("dendron", "dendron-vault/notes"), ("til", "til-jbranchaud/notes")):
        root = data / folder
        if not root.is_dir():
            continue
        src = open_source(SourceConfig(name, "markdown", str(root)))
        for stub in sorted(src.scan(), key=lambda s: s.note_id):
            note = src.load(stub.note_id)
            if note is not None:
                yield BaseNote(note.note_id, note.title, note.text)
    corpus = data / "scifact" / "corpus.jsonl"
    if corpus.exists():
        with open(corpus, encoding="utf-8") as f:
            for line in f:
                doc = json.loads(line)
                yield BaseNote(f"scifact:{doc['_id']}", doc.get("title") or doc["_id"],
                               doc.get("text", ""))


def sample_chunks(n: int, seed: int = 7) -> list[str]:
    """``n`` texts as the model reads them (title, heading path, passage), drawn evenly
    from the chunks of the first 10,000 real ones, so lengths are mixed as in real use."""
    import random

    from notewell.ingest.chunking import chunk_note

    texts: list[str] = []
    for note in base_notes():
        texts += [c.embed_text(note.title) for c in chunk_note(note.title, note.text)]
        if len(texts) >= REAL_LIMIT:
            break
    return random.Random(seed).sample(texts, min(n, len(texts)))


def queries(n: int = 60) -> list[str]:
    """Search queries a person might type: short note-style phrases (titles of the base
    notes, lowercased, 2-5 words) and SciFact test claims, interleaved."""
    titles = []
    for note in base_notes():
        words = re.findall(r"[A-Za-z][\w'-]*", note.title)
        if 2 <= len(words) <= 5 and not note.key.startswith("scifact"):
            titles.append(" ".join(words).lower())
    titles = titles[:: max(1, len(titles) // n)][: n // 2]
    claims = []
    qpath = shared_data() / "scifact" / "queries.jsonl"
    tests = shared_data() / "scifact" / "qrels" / "test.tsv"
    if qpath.exists() and tests.exists():
        wanted = {line.split("\t")[0] for line in tests.read_text().splitlines()[1:]}
        with open(qpath, encoding="utf-8") as f:
            for line in f:
                q = json.loads(line)
                if q["_id"] in wanted:
                    claims.append(q["text"])
    claims = claims[: n - len(titles)]
    out = [q for pair in zip(titles, claims) for q in pair]
    out += titles[len(claims):] + claims[len(titles):]
    if len(out) < n:
        # Said out loud: figures over other queries are not comparable (a checkout of an
        # older commit without ../shared beside it measured 19 typed prefixes, not 430).
        print(f"note: {len(out) or 3} queries, not {n}: {shared_data()} is missing or small "
              "(NOTEWELL_BENCH_DATA)", file=sys.stderr)
    return out or ["notes search", "undo last commit", "postgres vacuum"]


# -- vectors --------------------------------------------------------------------------------------


def text_key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class VectorStore:
    """Real-model vectors by text hash, one ``.npz`` per model fingerprint."""

    def __init__(self, fingerprint: str) -> None:
        name = hashlib.sha256(fingerprint.encode()).hexdigest()[:16]
        self.path = cache_dir() / f"vectors-{name}.npz"
        self.vectors: dict[bytes, np.ndarray] = {}
        self.dirty = 0
        if self.path.exists():
            data = np.load(self.path)
            for key, vec in zip(data["keys"], data["vectors"]):
                self.vectors[bytes(key)] = vec

    def save(self) -> None:
        if not self.dirty:
            return
        keys = np.array([np.frombuffer(k, dtype=np.uint8) for k in self.vectors])
        vecs = np.stack(list(self.vectors.values())).astype(np.float32)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=keys, vectors=vecs)
        os.replace(tmp, self.path)
        self.dirty = 0


class BenchEmbedder:
    """The real model's fingerprint and vectors, without paying for them twice.

    Texts without a copy marker get the real vector (cached by text hash, computed with the
    real model when missing). A copy's text (``Title ⁂7``) gets its original's vector plus
    seeded Gaussian noise; ``random=True`` gives every text a random unit vector instead."""

    def __init__(self, random: bool = False) -> None:
        from notewell.model.runtime import default_embedder

        self.real = default_embedder()
        self.id, self.dim = self.real.id, self.real.dim
        self.store = VectorStore(self.real.fingerprint())
        self.random = random
        self.last_save = time.monotonic()

    def fingerprint(self) -> str:
        return self.real.fingerprint()

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if self.random:
            for i, t in enumerate(texts):
                out[i] = _unit(_rng(t).standard_normal(self.dim))
            return out
        bases = [COPY_MARK.sub("", t) for t in texts]
        missing = sorted({b for b in bases if text_key(b) not in self.store.vectors})
        if missing:
            vecs = self.real.embed_batch(missing)
            for b, v in zip(missing, vecs):
                self.store.vectors[text_key(b)] = v
            self.store.dirty += len(missing)
            if time.monotonic() - self.last_save > 60:
                self.store.save()
                self.last_save = time.monotonic()
        for i, (t, b) in enumerate(zip(texts, bases)):
            v = self.store.vectors[text_key(b)]
            out[i] = v if t == b else _unit(v + COPY_NOISE * _rng(t).standard_normal(self.dim))
        return out


def _rng(text: str) -> np.random.Generator:
    return np.random.default_rng(int.from_bytes(text_key(text)[:8], "little"))


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32)


# -- corpora ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Corpus:
    label: str
    root: Path
    home: Path
    notes: int
    chunks: int
    vectors: int
    synthetic: bool
    random_vectors: bool

    @property
    def notes_dir(self) -> Path:
        return self.root / "notes"

    def index_path(self) -> str:
        from notewell.index import store

        return store.current_path(str(self.home / "index"))

    def describe(self) -> str:
        kind = ("random unit vectors" if self.random_vectors else
                "synthetic: real texts repeated, real vectors plus noise" if self.synthetic
                else "real texts, real vectors")
        return f"{self.chunks:,} chunks / {self.notes:,} notes ({kind})"


def chunk_count(note: BaseNote) -> int:
    from notewell.ingest.chunking import chunk_note

    return len(chunk_note(note.title, note.text))


def _note_file(note: BaseNote, copy: int) -> str:
    title = note.title if copy == 0 else f"{note.title} ⁂{copy}"
    return f"# {title}\n\n{note.text.strip()}\n"


def build_corpus(size: str | int, *, notes: int | None = None, random_vectors: bool = False,
                 progress: bool = True, rebuild: bool = False) -> Corpus:
    """The corpus of about ``size`` chunks (or exactly ``notes`` notes), built once and
    reused from the cache folder."""
    target = SIZES[size] if isinstance(size, str) else int(size)
    label = f"{target}{'-random' if random_vectors else ''}"
    if notes:
        target, label = 1 << 62, f"{notes}notes{'-random' if random_vectors else ''}"
    # One per chunker: a checkout of another version (compare.py --old) would refuse to
    # open an index its chunker did not cut.
    from notewell.ingest.chunking import ChunkSettings

    chunker = hashlib.sha256(ChunkSettings().fingerprint().encode()).hexdigest()[:8]
    root = cache_dir() / "corpora" / f"{label}-{chunker}"
    done = root / "built.json"
    if done.exists() and not rebuild:
        return Corpus(**{**json.loads(done.read_text()), "root": root,
                         "home": root / "home"})
    if root.exists():
        shutil.rmtree(root)
    notes_dir = root / "notes"
    home = root / "home"
    notes_dir.mkdir(parents=True)
    home.mkdir()
    base: list[tuple[BaseNote, int]] = []
    total = 0
    for note in base_notes():
        if total >= min(target, REAL_LIMIT) or len(base) >= (notes or 1 << 62):
            break
        n = chunk_count(note)
        if n:
            base.append((note, n))
            total += n
    written = chunks = copy = 0
    while chunks < target and written < (notes or 1 << 62):
        folder = notes_dir / f"c{copy:04d}"
        folder.mkdir()
        for i, (note, n) in enumerate(base):
            if chunks >= target or written >= (notes or 1 << 62):
                break
            (folder / f"{i:05d}.md").write_text(_note_file(note, copy), encoding="utf-8")
            written += 1
            chunks += n
        copy += 1
    if progress:
        print(f"corpus {label}: wrote {written:,} notes (~{chunks:,} chunks) to {notes_dir}",
              file=sys.stderr)
    counts = index_corpus(home, notes_dir, BenchEmbedder(random=random_vectors),
                          progress=progress)
    info = {"label": label, "notes": counts["notes"], "chunks": counts["chunks"],
            "vectors": counts["embeddings"], "synthetic": copy > 1,
            "random_vectors": random_vectors}
    done.write_text(json.dumps(info))
    return Corpus(**info, root=root, home=home)


def write_config(home: Path, notes_dir: Path, name: str = "bench") -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[[sources]]\nname = "{name}"\ntype = "markdown"\npath = "{notes_dir}"\n')


def index_corpus(home: Path, notes_dir: Path, embedder, progress: bool = True,
                 name: str = "bench") -> dict:
    """Index a Markdown folder into ``home`` through notewell's sync, as `notewell index`."""
    from notewell import config as nconfig
    from notewell.engine import Engine

    write_config(home, notes_dir, name)
    with env(NOTEWELL_HOME=str(home)):
        cfg = nconfig.load()
        engine = Engine(cfg, embedder=embedder, index_dir=str(home / "index"))
        try:
            engine.sync(progress=progress)
            engine.index.checkpoint()
            counts = engine.index.counts()
        finally:
            engine.close()
            store = getattr(embedder, "store", None)
            if store is not None:
                store.save()
    return counts


@contextlib.contextmanager
def env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def all_vectors(index_path: str) -> tuple[np.ndarray, np.ndarray]:
    """(ids, vectors) of every stored vector, for exact search."""
    from notewell.index import sql
    from notewell.index.schema import connect

    conn = connect(index_path)
    try:
        rows = sql.all_vectors(conn).fetchall()
    finally:
        conn.close()
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    vecs = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    order = np.argsort(ids)
    return ids[order], vecs[order]


def recall_at(exact: list[int], got: list[int], k: int) -> float:
    return len(set(exact[:k]) & set(got[:k])) / max(1, min(k, len(exact)))


def write_json(path: str | None, result: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(result, indent=2))


def finish(path: str | None, result: dict) -> dict:
    """Every benchmark's last words: the load it ran under, and its figures as JSON."""
    print()
    print(load_note())
    write_json(path, result)
    return result


# -- a daemon in a subprocess ------------------------------------------------------------------


class DaemonProcess:
    """``notewell serve`` on a benchmark home, started and stopped by the benchmark."""

    def __init__(self, home: Path, *, fake: bool = False, poll: float = 5.0,
                 timeout: float = 300.0) -> None:
        import subprocess

        self.home = home
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("NOTEWELL_")}
        self.env["NOTEWELL_HOME"] = str(home)
        self.env["NOTEWELL_MODEL_DIR"] = os.environ["NOTEWELL_MODEL_DIR"]
        self.env["PYTHONPATH"] = str(REPO / "daemon")
        if not fake:
            prepare_model(self.env)
        with env(NOTEWELL_HOME=str(home)):
            from notewell.wire import paths

            self.socket_path = paths.socket_path()
        self.log = home / "bench-daemon.log"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                # notewell.model.fake: the test-only entry point with the fake embedder.
                [sys.executable, "-m", "notewell.model.fake" if fake else "notewell", "serve",
                 "--poll", str(poll)],
                env=self.env, stdout=out, stderr=out, stdin=subprocess.DEVNULL)
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def ask(self, op: str, **args) -> dict:
        from notewell.wire import client, protocol

        # Its own socket, not NOTEWELL_HOME set around the call: threads asking together
        # (bench/memory.py's typists) would restore each other's environment mid-call.
        return client.ask(protocol.request(op, **args), timeout=30,
                          socket_path=self.socket_path)

    def _wait_ready(self, timeout: float) -> None:
        from notewell.wire import protocol

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited {self.proc.returncode}; see {self.log}")
            try:
                reply = self.ask("status")
                result = reply.get("result") or {}
                if reply.get("ok") and result.get("state") == "ready" and result.get(
                        "last_sync"):
                    return
            except (OSError, protocol.ProtocolError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"daemon not ready after {timeout:.0f}s; see {self.log}")

    def wait_warm(self, timeout: float = 600.0, settle: float = 2.0) -> dict[str, int]:
        """Wait until both in-memory copies (vectors, keywords) are loaded, then ``settle``
        seconds more; the copies' sizes in bytes. Until then searches share the cores with
        loading them: keystrokes right after a start measured 4.4-10 ms instead of 4.5."""
        deadline = time.monotonic() + timeout
        copies: dict[str, int] = {}
        while time.monotonic() < deadline:
            copies = (self.ask("status").get("result") or {}).get("in_memory") or {}
            if copies and all(v is not None for v in copies.values()):
                time.sleep(settle)
                return copies
            time.sleep(0.2)
        raise RuntimeError(f"in-memory copies not loaded after {timeout:.0f}s: {copies}")

    def stop(self) -> None:
        from notewell.ops.demo import stop_daemon

        stop_daemon(self.proc, timeout=20)
