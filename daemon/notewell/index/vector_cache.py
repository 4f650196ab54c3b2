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

At 100k rows the sign-bit scan, cutting out the best 1,600 and re-scoring them takes
1.3-1.5 ms. A coarse stage in onnxruntime (4-bit codes of the principal components) once
stood in front of it and took that to 0.65-0.78 ms; it was removed as not worth its
several hundred lines and the timing check it needed at run time (bench/README.md).

Why the mean comes off first: the model's vectors share a common direction (the mean of
100k chunks has norm 0.28), so raw sign bits spend many of their 384 bits on dimensions
that are positive for almost every text. Centred, each bit splits the corpus; the same
recall@10 (0.99 on the 100k corpus) needs 800 candidates instead of 3,200.

The copy is tied to the index by two values read in the same transaction as the vectors:
``max(embeddings.id)`` (new vectors get higher ids) and the ``vectors_epoch`` meta value,
which ``Index`` changes whenever it deletes vectors. A query that finds either changed
pulls the new rows (few, after an edit) or, after a deletion, waits for a full reload
(``copies``). Imports nothing of notewell.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

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
                 min_candidates: int = 800, share: int = 64,
                 parallel_from: int = PARALLEL_FROM, center: np.ndarray | None = None) -> None:
        # Candidates for re-scoring, measured with centred bits (bench/search_latency.py):
        # at 100k, 1,600 give recall@10 0.985 and recall@80 (the dense list search
        # fuses) 0.96, 3,125 give 0.995 and 0.98 for 0.4 ms more. At 1M, recall@10 stays
        # at 0.973 from 15,600 candidates to 31,000: there the int8 scores themselves
        # cannot order the synthetic corpus's 100 near-copies of each passage, so
        # ``reads.Reads.knn`` re-scores the best few with float vectors (1.0).
        self.dim = dim
        self.exact_limit = exact_limit
        self.oversample = oversample
        self.min_candidates = min_candidates
        self.share = share
        self.parallel_from = parallel_from
        # What sign bits are taken around: the mean of the first vectors coded, unless
        # given (a zero centre gives the raw signs); fixed once the first codes are made.
        self._center = None if center is None else np.asarray(center, dtype=np.float32)
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

    @property
    def quantized(self) -> bool:
        return self._f32 is None

    def nbytes(self) -> int:
        parts = [self._ids, self._bits, self._i8, self._scale]
        if self._f32 is not None:
            parts.append(self._f32)
        return sum(p.nbytes for p in parts)

    @property
    def center(self) -> np.ndarray | None:
        """The point sign bits are taken around (None until the first codes are made)."""
        return self._center

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
                    center: np.ndarray | None) -> np.ndarray:
        """Rows of the quantized layout to re-score for ``q``: the nearest by sign bits,
        ``max(k * oversample, min_candidates, n / share)`` of them (near-ties around a
        query grow with the index)."""
        pool = max(k * self.oversample, self.min_candidates, n // self.share)
        if pool >= n:
            return np.arange(n)
        query_bits = sign_bits((q if center is None else q - center)[None, :])[0]
        dist = np.concatenate(_split(lambda a, b: hamming(bits[:, a:b], query_bits), n,
                                     2 if n >= self.parallel_from else 1))
        return nearest_rows(dist, pool)

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
            center = self._center
        if n == 0 or k <= 0:
            return []
        if f32 is not None:
            rows = np.arange(n)
            sims = matvec(f32, q)
        else:
            rows = self._candidates(q, k, n, bits, center)
            halves = 2 if n >= self.parallel_from else 1
            sims = np.concatenate(_split(
                lambda a, b: _rescore(i8, scale, rows[a:b], q), len(rows), halves))
        k = min(k, len(rows))
        top = np.argpartition(-sims, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
        # Nearest first; equal distances by id, as a stable order for callers and tests.
        order = np.lexsort((ids[rows[top]], -sims[top]))
        best = top[order]
        return [(int(ids[rows[i]]), float(1.0 - sims[i])) for i in best]
