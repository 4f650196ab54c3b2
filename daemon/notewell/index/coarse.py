"""Coarse k-NN scoring of a large vector copy in onnxruntime: the first of two stages.

``vector_cache`` keeps every vector as int8 for re-scoring; what it needs first is a cheap
score for *every* row that puts the true nearest few hundred in front. Sign bits scanned
in numpy did that in 0.57 ms at 100k rows, plus 0.23 ms to cut the best 1,600 out and
0.39 to re-score them (1.3 ms in all), and numpy cannot go faster: each pass over the rows
is a separate call, and two threads gained nothing (the GIL changes hands between calls).

A ``CoarseScorer`` holds each row as 4-bit codes of its first ``DIMS`` principal
components (centred on the mean, each in units of its spread) and scores all rows against
a query with onnxruntime's ``MatMulNBits`` (4-bit weights, int8 arithmetic: the operator
that runs quantized language models, in every onnxruntime wheel since 1.17) on
onnxruntime's own threads, then keeps the best with one numpy pass (``best``). Measured on
the 2-core Xeon over the 100k corpus (throw-away scripts; ``bench/search_latency.py`` and
``bench/peers.py`` measure the whole path):

- 256 components keep 92% of the variance. Their 4-bit scores put the true top 80 among
  the best 200 often enough that int8 re-scoring gives recall@10 0.992 and @80 0.994
  (sign bits needed 1,600 candidates for 0.992 / 0.971); 192 components need 400 and
  128 need 800 for as much;
- scoring 100k rows takes 0.38 ms on two threads in blocks of 128 components, 0.47 in
  blocks of 32 (all 384 dimensions: 0.71; two bits instead of four: faster, but 800
  candidates needed). Blocks of 128 lose nothing only because every component is scaled
  to one spread first; the query's components are scaled back, so products are unchanged;
- 136 bytes of codes and scales per row, held twice: here, and packed by onnxruntime
  (27 MB at 100k rows in all, measured).

The codes are fixed when the scorer is built: rows added later are scored by the caller
(``vector_cache`` scans them with sign bits) until it builds a new scorer over all rows.
The codes must be initializers: passed as inputs, onnxruntime cannot pack them ahead and
one query takes 76-110 ms.
"""

from __future__ import annotations

import threading

import numpy as np

from notewell.index import onnx_writer as ox
from notewell.index.topk import best

DIMS = 256
BLOCK = 128  # components per 4-bit block with its own scale
SAMPLE = 20_000  # rows the principal components are estimated from


class CoarseScorer:
    """Approximate inner products of a query with ``rows`` fixed vectors, for the best."""

    def __init__(self, vectors: np.ndarray | None = None, *, threads: int = 2,
                 decode=None, rows: int | None = None) -> None:
        """From ``vectors`` (n x dim float32), or from ``rows`` rows given by
        ``decode(start, stop)`` in blocks, so a quantized copy never decodes all at once."""
        if vectors is not None:
            rows = len(vectors)
            decode = lambda a, b: vectors[a:b]  # noqa: E731
        if not rows or decode is None:
            raise ValueError("a coarse scorer needs at least one row")
        self.rows = rows
        sample = decode(0, rows) if rows <= SAMPLE else np.concatenate(
            [decode(a, min(a + 1024, rows)) for a in
             np.linspace(0, rows - 1024, SAMPLE // 1024, dtype=np.int64)])
        self.dim = sample.shape[1]
        self.mean = sample.mean(axis=0).astype(np.float32)
        centred = sample - self.mean
        # Principal axes, largest first: the top components hold most of what
        # tells two texts apart, so fewer 4-bit numbers rank about as well as all 384.
        # No matrix products through numpy's BLAS here: its second thread keeps ~21 MB of
        # buffers for good (measured), a tenth of the daemon's budget. einsum runs its own
        # loops (0.3 s for the covariance), onnxruntime projects the rows.
        _, axes = np.linalg.eigh(np.einsum("ij,ik->jk", centred, centred))
        dims = min(DIMS, self.dim)
        self.block = BLOCK
        while dims % self.block:  # MatMulNBits: blocks of a power of two, at least 16
            self.block //= 2
        if self.block < 16:
            raise ValueError(f"{dims} dimensions do not split into 4-bit blocks")
        axes = axes[:, ::-1][:, :dims]
        # Each component in units of its spread, the query's scaled back up, leaves the
        # products unchanged and gives every 4-bit block numbers of one size.
        axes = np.ascontiguousarray(axes, dtype=np.float32)
        spread = np.einsum("ij,jk->ik", centred[:4096], axes).std(axis=0)
        spread[spread == 0] = 1.0
        del sample, centred
        self.axes = axes / spread
        self.query_axes = axes * spread
        project = _projection(self.mean, self.axes, threads)
        codes = np.empty((rows, dims // self.block, self.block // 2), dtype=np.uint8)
        scales = np.empty((rows, dims // self.block), dtype=np.float32)
        for start in range(0, rows, 8192):
            stop = min(start + 8192, rows)
            codes[start:stop], scales[start:stop] = pack4(project(decode(start, stop)),
                                                          self.block)
        self._session, self._held = _session(codes, scales, threads)
        self._local = threading.local()  # per thread: the daemon searches on 4 workers

    def top(self, query: np.ndarray, pool: int) -> np.ndarray:
        """Row numbers of at least ``pool`` of the best-scoring rows, in no order."""
        pool = min(pool, self.rows)
        if pool <= 0:
            return np.zeros(0, dtype=np.int64)
        slot = getattr(self._local, "slot", None)
        if slot is None:
            slot = self._local.slot = self._bind()
        binding, projected, scores = slot
        np.einsum("i,ij->j", np.asarray(query, dtype=np.float32), self.query_axes,
                  out=projected[0])
        self._session.run_with_iobinding(binding)
        return best(scores[0], pool)

    def _bind(self) -> tuple:
        """This thread's input and output buffers, bound to the session once: an output
        that onnxruntime allocates on each run (400 KB at 100k rows) took 0.54 ms a query
        against 0.37 with the buffer kept (measured)."""
        projected = np.zeros((1, self.axes.shape[1]), dtype=np.float32)
        scores = np.zeros((1, self.rows), dtype=np.float32)
        binding = self._session.io_binding()
        binding.bind_cpu_input("query", projected)
        binding.bind_output("scores", "cpu", 0, np.float32, scores.shape, scores.ctypes.data)
        return binding, projected, scores

    def nbytes(self) -> int:
        """Codes and scales as built; onnxruntime's packed copy is about as big again."""
        return self.rows * (self.axes.shape[1] // 2 + self.axes.shape[1] // self.block * 4)


def pack4(values: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric 4-bit codes per ``block`` values: ``v ≈ (code - 8) * scale``, two codes a
    byte, the first in the low half (``MatMulNBits``' layout, zero point 8 by default)."""
    n, dims = values.shape
    blocks = values.reshape(n, dims // block, block)
    scale = np.abs(blocks).max(axis=2) / 7.0
    scale[scale == 0] = 1.0
    codes = (np.clip(np.rint(blocks / scale[..., None]), -8, 7) + 8).astype(np.uint8)
    return codes[..., 0::2] | (codes[..., 1::2] << 4), scale.astype(np.float32)


def _options(threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.enable_cpu_mem_arena = False
    # As for the model (embedding.py): spin within a run, park the threads after it.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1")
    opts.add_session_config_entry("session.force_spinning_stop", "1")
    return opts


def _projection(mean: np.ndarray, axes: np.ndarray, threads: int):
    """``(rows - mean) @ axes`` for blocks of rows, by onnxruntime (see the BLAS note)."""
    import onnxruntime as ort

    dim, dims = axes.shape
    session = ort.InferenceSession(ox.model(
        [ox.node("Sub", ["rows", "mean"], ["centred"]),
         ox.node("MatMul", ["centred", "axes"], ["projected"])],
        [ox.value_info("rows", ox.FLOAT, ["n", dim])],
        [ox.value_info("projected", ox.FLOAT, ["n", dims])],
        [ox.tensor("mean", ox.FLOAT, mean.shape, mean.astype(np.float32).tobytes()),
         ox.tensor("axes", ox.FLOAT, axes.shape, axes.astype(np.float32).tobytes())]),
        sess_options=_options(threads), providers=["CPUExecutionProvider"])
    return lambda rows: session.run(None, {"rows": np.asarray(rows, dtype=np.float32)})[0]


def _session(codes: np.ndarray, scales: np.ndarray, threads: int) -> tuple:
    """The scoring session, and what must live as long as it: the codes are handed to
    onnxruntime as external initializers, which it reads in place, where codes inside the
    serialized model were copied twice (29 MB held at 100k rows instead of 16, measured)."""
    import onnxruntime as ort

    rows, blocks, half = codes.shape
    dims = blocks * half * 2
    data = {"codes": (codes, ox.UINT8), "scales": (scales.reshape(-1), ox.FLOAT)}
    opts = _options(threads)
    values = [ort.OrtValue.ortvalue_from_numpy(array) for array, _ in data.values()]
    opts.add_external_initializers(list(data), values)
    session = ort.InferenceSession(ox.model(
        [ox.node("MatMulNBits", ["query", "codes", "scales"], ["scores"],
                 domain="com.microsoft", K=dims, N=rows, bits=4, block_size=half * 2,
                 accuracy_level=4)],
        [ox.value_info("query", ox.FLOAT, [1, dims])],
        [ox.value_info("scores", ox.FLOAT, [1, rows])],
        [ox.tensor(name, kind, array.shape, external=True)
         for name, (array, kind) in data.items()]),
        sess_options=opts, providers=["CPUExecutionProvider"])
    return session, (data, values)
