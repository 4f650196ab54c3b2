"""Fast k-NN for a resident process: an in-memory copy of the index's vectors.

sqlite-vec's ``vec0`` table answers k-NN by reading every float vector out of SQLite on
every query; measured on a 2-core Xeon that is about 1 ms per 1,000 vectors (100 ms at
100,000), and a point lookup by rowid costs tens of microseconds, so re-scoring candidates
from SQLite is no faster. A daemon answers thousands of queries per load, so it keeps its
own copy, in one of two layouts:

- up to ``exact_limit`` vectors, the float32 vectors themselves: one matrix-vector product
  gives exact cosine distances (1.5 KB per vector). Measured on the real 10k corpus, the
  product over 10,000 vectors takes 0.74 ms and the quantized layout 0.39 (k=10, recall
  0.997) in a third of the memory, so the float layout ends at 5,000 (0.37 ms);
- beyond it, two quantized codes per vector (436 bytes instead of 1,536): the 384 sign
  bits of the vector minus the corpus mean, which rank every vector by Hamming distance
  (XOR and popcount over six 64-bit words), and an int8 copy with a per-vector scale,
  which re-scores the best ``max(k * oversample, min_candidates, n / share)`` of them.
  The ``k`` returned are the best by the int8 score; their distances are the int8
  estimates, within about 1e-3 of the float ones. ``bench/search_latency.py`` measures
  recall against exact search.

From ``COARSE_FROM`` to ``COARSE_UNTIL`` rows a ``coarse.CoarseScorer`` (4-bit codes of
the principal components, scored in onnxruntime) replaces the sign-bit scan for the rows
it was built over, if it measures faster here: it ranks well enough that ~330 candidates
do what 1,600 did, and k-NN at 100k takes 0.65-0.78 ms instead of 1.3-1.5 (recall@80
0.993 instead of 0.968). Rows added after it was built are scanned with their sign bits
until a new one, built in the background over every row, takes over. Past
``COARSE_UNTIL`` it would hold 270 bytes a row (its codes, twice) beside a search of 30 ms.

Why the mean comes off first: the model's vectors share a common direction (the mean of
100k chunks has norm 0.28), so raw sign bits spend many of their 384 bits on dimensions
that are positive for almost every text. Centred, each bit splits the corpus; the same
recall@10 (0.99 on the 100k corpus) needs 800 candidates instead of 3,200.

The copy is tied to the index by two values read in the same transaction as the vectors:
``max(embeddings.id)`` (new vectors get higher ids) and the ``vectors_epoch`` meta value,
which ``Index`` changes whenever it deletes vectors. A query that finds either changed
pulls the new rows (few, after an edit) or, after a deletion, waits for a full reload.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from notewell.index.coarse import CoarseScorer

log = logging.getLogger(__name__)

_HAS_POPCOUNT = hasattr(np, "bitwise_count")  # numpy >= 2.0
_BYTE_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def sign_bits(vectors: np.ndarray) -> np.ndarray:
    """One bit per dimension (1 where positive), packed into uint64 words per row."""
    packed = np.packbits(np.asarray(vectors) > 0, axis=1)
    pad = (-packed.shape[1]) % 8
    if pad:
        packed = np.pad(packed, ((0, 0), (0, pad)))
    return np.ascontiguousarray(packed).view(np.uint64)


def int8_codes(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per vector: ``v ≈ codes * scale``, scale = max |v_i| / 127."""
    vectors = np.asarray(vectors, dtype=np.float32)
    scale = np.abs(vectors).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    codes = np.rint(vectors / scale[:, None]).astype(np.int8)
    return codes, scale.astype(np.float32)


def hamming(columns: np.ndarray, query_bits: np.ndarray) -> np.ndarray:
    """Hamming distance of each row to the query. ``columns`` holds one 64-bit word of every
    row per line (words x rows): one contiguous pass per word is 4-5x faster than
    reducing along short rows."""
    n = columns.shape[1]
    acc = np.zeros(n, dtype=np.uint16)
    word = np.empty(n, dtype=np.uint64)
    count = np.empty(n, dtype=np.uint8)
    for i, q in enumerate(query_bits):
        np.bitwise_xor(columns[i], q, out=word)
        if _HAS_POPCOUNT:
            np.bitwise_count(word, out=count)
            acc += count
        else:
            acc += _BYTE_POPCOUNT[word.view(np.uint8)].reshape(n, 8).sum(axis=1,
                                                                         dtype=np.uint16)
    return acc


def nearest_rows(dist: np.ndarray, pool: int) -> np.ndarray:
    """Indices of the ``pool`` smallest small-integer distances, in no order. A counting
    pass finds the cut-off distance: 2 ms at 1M rows where ``argpartition`` takes 15."""
    counts = np.cumsum(np.bincount(dist))
    cut = int(np.searchsorted(counts, pool))
    rows = np.flatnonzero(dist <= cut)  # one pass; the surplus at ``cut`` is dropped after
    surplus = len(rows) - pool
    if surplus > 0:
        at = np.flatnonzero(dist[rows] == cut)
        rows = np.delete(rows, at[len(at) - surplus:])
    return rows


def matvec(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` on the calling thread. ``@`` goes to OpenBLAS, which hands
    products of a few thousand rows to its threads; waking them cost 5-12 ms per query
    on a busy 2-core machine (bench/search_latency.py), against 0.25 ms for 4,000 x 384
    with einsum's own loops."""
    return np.einsum("ij,j->i", matrix, vector)


# The coarse scorer's range (see the module docstring). Below, it saves little: k=80 at 10k
# 0.33 against 0.46 ms with sign bits, for a second onnxruntime session's memory.
COARSE_FROM = 20_000
COARSE_UNTIL = 300_000
# Candidates the coarse scorer hands to int8 re-scoring: ``max(2k, COARSE_POOL, k * n /
# COARSE_SHARE)``, near-ties growing with both ``k`` and ``n``. At 100k (k=80: 201) recall@10
# was 0.992 and recall@80 0.994, as with 400; for k=10, 64 gave the same recall@10 as 200
# (0.9933, at 100k and over the 10k real vectors) and took 0.29 ms against 0.35 at 10k.
COARSE_POOL = 64
COARSE_SHARE = 40_000
# A new scorer is built once the rows it does not cover pass this share of it.
COARSE_REBUILD = 0.05
# The scorer is declined only when clearly slower than the sign bits: what the timing
# guards against is a kernel several times slower, not a busy moment's noise (at start, it
# was declined once in four runs of bench/memory.py by a strict comparison).
SCORER_TOLERANCE = 1.25
# A scorer declined as slower is built and timed once more this long after: the first
# check may have met a busy moment (at start, beside the keyword build) that outlasts any
# margin, and its verdict would otherwise hold until the copy is next reloaded.
SCORER_RETRY_S = 300.0

# From this many vectors a quantized search splits its scans over two threads (numpy lets
# go of the GIL in them): at 1M vectors 19 -> 13 ms on 2 cores. Below, the helper's wake-up
# and the risk of waiting for a busy core outweigh the gain (no gain measured at 100k).
PARALLEL_FROM = 250_000
_helper: ThreadPoolExecutor | None = None


def _split(work: Callable[[int, int], np.ndarray], n: int, parts: int) -> list[np.ndarray]:
    """``work(start, stop)`` over ``parts`` consecutive ranges of ``range(n)``, the first
    on a helper thread, results in order."""
    global _helper
    if parts == 1:
        return [work(0, n)]
    if _helper is None:
        _helper = ThreadPoolExecutor(1, thread_name_prefix="notewell-knn")
    mid = n // 2
    first = _helper.submit(work, 0, mid)
    second = work(mid, n)
    return [first.result(), second]


def _rescore(i8: np.ndarray, scale: np.ndarray, rows: np.ndarray, q: np.ndarray
             ) -> np.ndarray:
    """Cosines of ``q`` to the int8 rows ``rows``. einsum converts the int8 codes in its
    own small buffers, and blocks of 256 rows (96 KB) stay under the daemon's 128 KB
    mmap threshold (``memory.limit_heaps``), so no temporary is mapped and faulted in
    afresh per query: 400 rows 0.28 -> 0.06-0.09 ms in the daemon's heap settings."""
    sims = np.empty(len(rows), dtype=np.float32)
    for start in range(0, len(rows), 256):
        part = rows[start:start + 256]
        sims[start:start + len(part)] = np.einsum("ij,j->i", i8[part], q) * scale[part]
    return sims


class VectorCache:
    """The vectors of one index, for k-NN by cosine distance. Rows are appended in id
    order; deletions are handled by building a new cache. Safe for one writer (the
    appender) and many readers: readers take a consistent view under a short lock."""

    def __init__(self, dim: int, *, exact_limit: int = 5_000, oversample: int = 20,
                 min_candidates: int = 800, share: int = 64) -> None:
        # Candidates for re-scoring, measured with centred bits (bench/search_latency.py):
        # at 100k, 1,600 give recall@10 0.985 and recall@80 (the dense list search.py
        # fuses) 0.96, 3,125 give 0.995 and 0.98 for 0.4 ms more. At 1M, recall@10 stays
        # at 0.973 from 15,600 candidates to 31,000: there the int8 scores themselves
        # cannot order the synthetic corpus's 100 near-copies of each passage, so
        # ``Index.knn`` re-scores the best few with float vectors (1.0).
        self.dim = dim
        self.exact_limit = exact_limit
        self.oversample = oversample
        self.min_candidates = min_candidates
        self.share = share
        self._center: np.ndarray | None = None  # fixed once the first codes are made
        self.epoch = ""
        self.max_id = 0
        self.n = 0
        self._ids = np.zeros(0, dtype=np.int64)
        self._f32: np.ndarray | None = np.zeros((0, dim), dtype=np.float32)
        # Sign bits stored word-major (words x rows): see ``hamming``.
        self._bits = np.zeros((sign_bits(np.zeros((1, dim))).shape[1], 0), dtype=np.uint64)
        self._i8 = np.zeros((0, dim), dtype=np.int8)
        self._scale = np.zeros(0, dtype=np.float32)
        # Rows come in id order from SQLite, so ids are looked up by binary search; if a
        # load ever gives them out of order, a sorted permutation is kept instead.
        self._ascending = True
        self._order: np.ndarray | None = None
        self._lock = threading.Lock()
        self._scorer: CoarseScorer | None = None
        self._scorer_thread: threading.Thread | None = None
        # How often a scorer was declined (could not be built: for good; measured slower:
        # once more, ``SCORER_RETRY_S`` later), and when.
        self._declined: tuple[int, float] = (0, 0.0)

    @property
    def quantized(self) -> bool:
        return self._f32 is None

    def nbytes(self) -> int:
        parts = [self._ids, self._bits, self._i8, self._scale]
        if self._f32 is not None:
            parts.append(self._f32)
        scorer = self._scorer
        return sum(p.nbytes for p in parts) + (scorer.nbytes() if scorer else 0)

    @property
    def layout(self) -> str:
        """How the copy answers, for people: "float32", "int8+bits" or "4-bit coarse+int8"."""
        if not self.quantized:
            return "float32"
        return "4-bit coarse+int8" if self.coarse_rows else "int8+bits"

    @property
    def coarse_rows(self) -> int:
        """Rows the coarse scorer covers (0 without one)."""
        scorer = self._scorer
        return scorer.rows if scorer is not None else 0

    # -- the coarse scorer ------------------------------------------------------------------

    def prepare(self, wait: bool = True) -> None:
        """Build the coarse scorer over every row now if this copy's size calls for one and
        the rows it lacks are too many (``wait``: on this thread; else in the background).
        The loader calls this once a copy is read, so a daemon is warm with it."""
        with self._lock:
            if not self._wants_scorer(self.n, self.coarse_rows):
                return
            if wait:
                thread = None
            elif self._scorer_thread is None:
                thread = self._scorer_thread = threading.Thread(
                    target=self._build_scorer, name="notewell-coarse", daemon=True)
            else:
                return  # one is being built
        if thread is None:
            self._build_scorer()
        else:
            thread.start()

    def _wants_scorer(self, n: int, covered: int) -> bool:
        """Whether a (new) coarse scorer should be built for ``n`` rows, ``covered`` of
        which the current one covers."""
        times, when = self._declined
        return (self._f32 is None and COARSE_FROM <= n <= COARSE_UNTIL
                and n - covered > COARSE_REBUILD * covered
                and (times == 0 or (times < 2 and time.monotonic() - when >= SCORER_RETRY_S)))

    def _build_scorer(self) -> None:
        with self._lock:
            n, i8, scale, bits = self.n, self._i8, self._scale, self._bits
        try:
            scorer = CoarseScorer(
                decode=lambda a, b: i8[a:b].astype(np.float32) * scale[a:b, None],
                rows=n, threads=min(4, os.cpu_count() or 1))
            timing = None if self.coarse_rows else self._time_scorer(scorer, bits, n)
            slower = timing is not None and timing[0] > SCORER_TOLERANCE * timing[1]
            for_good = self._declined[0] >= 1
        except Exception as exc:  # an onnxruntime without the operator, no memory
            log.warning("k-NN stays on the sign-bit scan: the coarse scorer could not be "
                        "built (%s: %s)", type(exc).__name__, exc)
            slower, for_good = True, True
        else:
            if slower:
                log.warning("k-NN stays on the sign-bit scan: the coarse scorer measured "
                            "slower on this machine (%.2f ms against %.2f)%s", *timing,
                            "" if for_good else
                            f"; it is tried once more in {SCORER_RETRY_S:.0f} s")
            elif timing is not None:
                log.info("k-NN through the coarse scorer over %d rows: %.2f ms against %.2f "
                         "from sign bits", n, *timing)
        with self._lock:
            self._scorer_thread = None
            if slower:
                self._declined = (2 if for_good else 1, time.monotonic())
            elif scorer.rows > self.coarse_rows:  # rows only append: the first n are coded
                self._scorer = scorer

    def _time_scorer(self, scorer: CoarseScorer, bits: np.ndarray, n: int
                     ) -> tuple[float, float]:
        """Milliseconds for candidates and their re-scoring at the daemon's k=80, with
        ``scorer`` and from the sign-bit scan: the best of seven queries each, taken in
        turns, so a moment's load elsewhere (the keyword copy is built beside this at
        start) weighs on both (~15 ms). As for the model file (``model_file``): an
        onnxruntime whose 4-bit kernels fall back to a slow path must not make every
        query slower."""
        queries = self.matrix(self._ids[: min(n, 7)])[1]
        i8, scale = self._i8[:n], self._scale[:n]
        times: dict[bool, list[float]] = {True: [], False: []}
        for q in queries:
            for with_scorer in (True, False):
                start = time.perf_counter()
                _rescore(i8, scale, self._candidates(q, 80, n, bits, self._center,
                                                     scorer if with_scorer else None), q)
                times[with_scorer].append((time.perf_counter() - start) * 1000)
        return min(times[True]), min(times[False])

    # -- filling ----------------------------------------------------------------------------

    def append(self, ids: np.ndarray, vectors: np.ndarray, max_id: int | None = None) -> None:
        """Add rows (ids ascending, all above ``max_id`` so far)."""
        ids = np.asarray(ids, dtype=np.int64)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dim)
        with self._lock:
            n, m = self.n, len(ids)
            if self._f32 is not None and n + m > self.exact_limit:
                self._quantize_all()
            self._reserve(n + m)
            if m and (np.any(np.diff(ids) <= 0) or (n and ids[0] <= self._ids[n - 1])):
                self._ascending = False
            self._order = None
            self._ids[n:n + m] = ids
            if self._f32 is not None:
                self._f32[n:n + m] = vectors
            else:
                self._bits[:, n:n + m] = self._sign_bits(vectors).T
                self._i8[n:n + m], self._scale[n:n + m] = int8_codes(vectors)
            self.n = n + m
            top = int(ids.max()) if m else self.max_id
            self.max_id = max(self.max_id, top, max_id or 0)

    def _reserve(self, size: int) -> None:
        cap = len(self._ids)
        if size <= cap:
            return
        cap = max(size, int(cap * 1.5), 1024)

        def grow(a: np.ndarray) -> np.ndarray:
            out = np.zeros((cap, *a.shape[1:]), dtype=a.dtype)
            out[: self.n] = a[: self.n]
            return out

        self._ids = grow(self._ids)
        if self._f32 is not None:
            self._f32 = grow(self._f32)
        else:
            bits = np.zeros((self._bits.shape[0], cap), dtype=np.uint64)
            bits[:, : self.n] = self._bits[:, : self.n]
            self._bits, self._i8, self._scale = bits, grow(self._i8), grow(self._scale)

    def _quantize_all(self) -> None:
        assert self._f32 is not None
        rows = self._f32[: self.n]
        self._bits = np.ascontiguousarray(self._sign_bits(rows).T)
        self._i8, self._scale = int8_codes(rows)
        self._f32 = None

    def _sign_bits(self, vectors: np.ndarray) -> np.ndarray:
        """Sign bits around the corpus mean, taken from the first vectors coded: later
        ones share it, so the bits of every row (and of queries) stay comparable."""
        if self._center is None and len(vectors):
            self._center = vectors.mean(axis=0).astype(np.float32)
        return sign_bits(vectors - self._center if self._center is not None else vectors)

    # -- reading ----------------------------------------------------------------------------

    def matrix(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """Which of ``ids`` are here (a mask) and their vectors as the rows of one matrix,
        in that order: float32 rows as stored, or decoded from int8 (within about 1e-3
        per cosine) in the quantized layout."""
        wanted = np.asarray(ids, dtype=np.int64)
        with self._lock:
            n = self.n
            stored, f32 = self._ids[:n], (self._f32[:n] if self._f32 is not None else None)
            i8, scale = self._i8[:n], self._scale[:n]
            if not self._ascending and self._order is None:
                self._order = np.argsort(stored, kind="stable")
            order = self._order
        if n == 0 or not len(wanted):
            return np.zeros(len(wanted), dtype=bool), np.zeros((0, self.dim), np.float32)
        keys = stored if order is None else stored[order]
        pos = np.minimum(np.searchsorted(keys, wanted), n - 1)
        found = keys[pos] == wanted
        rows = pos[found] if order is None else order[pos[found]]
        if f32 is not None:
            return found, f32[rows]
        return found, i8[rows].astype(np.float32) * scale[rows, None]

    # -- searching ----------------------------------------------------------------------------

    def _candidates(self, q: np.ndarray, k: int, n: int, bits: np.ndarray,
                    center: np.ndarray | None, scorer: CoarseScorer | None) -> np.ndarray:
        """Rows of the quantized layout to re-score for ``q``: the coarse scorer's best
        among the rows it covers, and the nearest by sign bits among the rest."""
        covered = scorer.rows if scorer is not None else 0
        parts = []
        if scorer is not None:
            parts.append(scorer.top(q, max(k * 2, COARSE_POOL, k * n // COARSE_SHARE)))
        rest = n - covered
        # Also a share of the index: near-ties around a query grow with it.
        pool = max(k * self.oversample, self.min_candidates, rest // self.share)
        if pool < rest:
            query_bits = sign_bits((q if center is None else q - center)[None, :])[0]
            dist = np.concatenate(_split(
                lambda a, b: hamming(bits[:, covered + a:covered + b], query_bits),
                rest, 2 if n >= PARALLEL_FROM else 1))
            parts.append(covered + nearest_rows(dist, pool))
        elif rest:
            parts.append(np.arange(covered, n))
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(id, cosine distance) of the ``k`` nearest rows, nearest first."""
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        norm = float(q @ q) ** 0.5  # np.linalg.norm: 15 us a query, this 1
        if norm > 0:
            q = q / norm
        with self._lock:
            n = self.n
            ids, f32 = self._ids[:n], (self._f32[:n] if self._f32 is not None else None)
            bits, i8, scale = self._bits[:, :n], self._i8[:n], self._scale[:n]
            center, scorer = self._center, self._scorer
        if n == 0 or k <= 0:
            return []
        if f32 is not None:
            rows = np.arange(n)
            sims = matvec(f32, q)
        else:
            rows = self._candidates(q, k, n, bits, center, scorer)
            halves = 2 if n >= PARALLEL_FROM else 1
            sims = np.concatenate(_split(
                lambda a, b: _rescore(i8, scale, rows[a:b], q), len(rows), halves))
            self.prepare(wait=False)  # a new scorer, once enough rows were added
        k = min(k, len(rows))
        top = np.argpartition(-sims, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
        # Nearest first; equal distances by id, as a stable order for callers and tests.
        order = np.lexsort((ids[rows[top]], -sims[top]))
        best = top[order]
        return [(int(ids[rows[i]]), float(1.0 - sims[i])) for i in best]
