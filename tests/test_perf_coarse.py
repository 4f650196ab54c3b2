"""The coarse scorer in front of int8 re-scoring: its 4-bit codes, its cut of the best
scores, its recall, and how the vector copy builds, extends and falls back from it."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from notewell.index import coarse, vector_cache
from notewell.index.coarse import CoarseScorer, pack4
from notewell.index.vector_cache import VectorCache
from test_perf_vector_cache import clustered, exact_knn, unit


def queries_near(vecs: np.ndarray, n: int, seed: int = 9) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dim = vecs.shape[1]
    return unit(vecs[:n] + 0.5 * rng.standard_normal((n, dim)) / np.sqrt(dim))


def test_pack4_codes_two_to_a_byte_low_half_first():
    values = np.array([[7.0, -8.0, 0.0, 3.5] * 4], dtype=np.float32)  # one block of 16
    codes, scales = pack4(values, 16)
    assert codes.shape == (1, 1, 8) and scales.shape == (1, 1)
    assert scales[0, 0] == pytest.approx(8.0 / 7.0)
    low, high = int(codes[0, 0, 0] & 0xF), int(codes[0, 0, 0] >> 4)
    assert (low - 8, high - 8) == (6, -7)  # 7 / (8/7) rounds to 6; -8 / (8/7) = -7
    rng = np.random.default_rng(2)
    values = rng.standard_normal((50, 256)).astype(np.float32)
    codes, scales = pack4(values, 128)
    nibbles = np.stack([codes & 0xF, codes >> 4], axis=-1).reshape(50, 2, 128)
    decoded = (nibbles.astype(np.float32) - 8) * scales[..., None]
    assert np.abs(decoded.reshape(50, 256) - values).max() <= scales.max() / 2 + 1e-6


def test_scorer_ranks_the_true_neighbours_into_a_small_pool():
    vecs = clustered(6000, seed=2, dim=384)
    scorer = CoarseScorer(vecs, threads=1)
    assert scorer.rows == 6000 and scorer.axes.shape == (384, coarse.DIMS)
    covered = []
    for q in queries_near(vecs, 20):
        rows = set(scorer.top(q, 200).tolist())
        covered.append(len(rows & set(exact_knn(np.arange(6000), vecs, q, 10))) / 10)
    assert np.mean(covered) >= 0.95, covered
    assert len(scorer.top(vecs[0], 10**6)) == 6000
    assert len(scorer.top(vecs[0], 0)) == 0


def test_scorer_on_a_dimension_that_is_not_a_multiple_of_its_block():
    vecs = clustered(800, seed=3, dim=48)  # 48 = 3 blocks of 16
    scorer = CoarseScorer(vecs, threads=1)
    assert scorer.block == 16
    assert 0 in scorer.top(vecs[0], 20).tolist()
    with pytest.raises(ValueError):
        CoarseScorer(clustered(100, dim=40), threads=1)  # 40 has no block of 16 or more


def quantized(n: int, monkeypatch, dim: int = 384, seed: int = 2, measure: bool = False
              ) -> tuple:
    """A quantized copy of ``n`` clustered vectors, in the coarse scorer's range. Unless
    ``measure``, a scorer is taken without timing it against the sign bits (at a few
    thousand rows the two are close, and a test must not hang on a busy machine's clock)."""
    monkeypatch.setattr(vector_cache, "COARSE_FROM", 1000)
    if not measure:
        monkeypatch.setattr(VectorCache, "_time_scorer", lambda *args: (0.0, 1.0))
    vecs = clustered(n, seed=seed, dim=dim)
    ids = np.arange(1, n + 1, dtype=np.int64)
    cache = VectorCache(dim, exact_limit=500)
    cache.append(ids, vecs)
    return cache, ids, vecs


def test_copy_answers_through_the_scorer_with_exact_recall(monkeypatch):
    cache, ids, vecs = quantized(6000, monkeypatch)
    assert cache.layout == "int8+bits"
    cache.prepare()
    assert cache.coarse_rows == 6000 and cache.layout == "4-bit coarse+int8"
    recalls = []
    for q in queries_near(vecs, 30):
        got = cache.search(q, 10)
        recalls.append(len({i for i, _ in got} & set(exact_knn(ids, vecs, q, 10))) / 10)
        true = 1 - vecs[[i - 1 for i, _ in got]] @ q
        assert np.abs(np.array([d for _, d in got]) - true).max() < 5e-3
    assert np.mean(recalls) >= 0.97


def test_rows_added_after_the_scorer_are_found_and_then_covered(monkeypatch):
    cache, _, vecs = quantized(6000, monkeypatch)
    cache.prepare()
    # An edit: a new vector nearly equal to a query, after the scorer was built.
    q = queries_near(vecs, 1, seed=4)[0]
    cache.append(np.array([9000]), unit(q + 0.01)[None, :])
    assert cache.coarse_rows == 6000
    assert cache.search(q, 3)[0][0] == 9000
    # Many more: past the rebuild share, a search starts a scorer over every row.
    extra = clustered(600, seed=8, dim=384)
    cache.append(np.arange(10_000, 10_600), extra)
    assert cache.search(extra[5], 1)[0][0] == 10_005
    thread = cache._scorer_thread
    if thread is not None:
        thread.join(30)
    assert cache.coarse_rows == 6601
    assert cache.search(extra[5], 1)[0][0] == 10_005


def test_a_scorer_that_cannot_be_built_leaves_the_sign_bit_scan(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("no MatMulNBits here")

    monkeypatch.setattr(vector_cache, "CoarseScorer", broken)
    cache, ids, vecs = quantized(3000, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="notewell.index.vector_cache"):
        cache.prepare()
    assert cache.coarse_rows == 0 and "sign-bit scan" in caplog.text
    q = queries_near(vecs, 1)[0]
    got = [i for i, _ in cache.search(q, 5)]
    assert got[0] == exact_knn(ids, vecs, q, 1)[0]
    assert len(set(got) & set(exact_knn(ids, vecs, q, 5))) >= 4
    monkeypatch.setattr(vector_cache, "SCORER_RETRY_S", 0.0)
    cache.prepare()  # not tried again, now or later: it cannot be built here
    assert caplog.text.count("sign-bit scan") == 1


def test_sizes_outside_the_range_get_no_scorer(monkeypatch):
    cache, _, _ = quantized(3000, monkeypatch)
    monkeypatch.setattr(vector_cache, "COARSE_UNTIL", 2000)
    cache.prepare()
    assert cache.coarse_rows == 0
    small = VectorCache(384)  # the exact layout has no use for one
    small.append(np.arange(1, 1001), clustered(1000, dim=384))
    small.prepare()
    assert small.coarse_rows == 0 and small.layout == "float32"


def test_onnx_writer_bytes_read_back_through_onnx():
    onnx = pytest.importorskip("onnx")
    from notewell.index import onnx_writer as ox

    axes = np.arange(12, dtype=np.float32).reshape(3, 4)
    data = ox.model(
        [ox.node("MatMul", ["rows", "axes"], ["out"]),
         ox.node("MatMulNBits", ["q", "codes", "scales"], ["scores"], domain="com.microsoft",
                 K=256, N=100_000, bits=4, block_size=128, accuracy_level=-1)],
        [ox.value_info("rows", ox.FLOAT, ["n", 3])],
        [ox.value_info("out", ox.FLOAT, ["n", 4]), ox.value_info("scores", ox.FLOAT, [1, 7])],
        [ox.tensor("axes", ox.FLOAT, axes.shape, axes.tobytes()),
         ox.tensor("codes", ox.UINT8, (7, 2, 64), external=True)])
    m = onnx.load_model_from_string(data)
    assert m.ir_version == ox.IR_VERSION
    assert {(o.domain, o.version) for o in m.opset_import} == {("", 17), ("com.microsoft", 1)}
    g = m.graph
    assert [(n.op_type, n.domain, list(n.input), list(n.output)) for n in g.node] == [
        ("MatMul", "", ["rows", "axes"], ["out"]),
        ("MatMulNBits", "com.microsoft", ["q", "codes", "scales"], ["scores"])]
    attrs = {a.name: (a.i, a.type) for a in g.node[1].attribute}
    assert attrs == {"K": (256, 2), "N": (100_000, 2), "bits": (4, 2), "block_size": (128, 2),
                     "accuracy_level": (-1, 2)}
    assert np.array_equal(onnx.numpy_helper.to_array(g.initializer[0]), axes)
    codes = g.initializer[1]
    assert list(codes.dims) == [7, 2, 64] and codes.data_type == onnx.TensorProto.UINT8
    assert codes.data_location == onnx.TensorProto.EXTERNAL
    assert {e.key: e.value for e in codes.external_data} == {"location": "in-memory"}
    rows = g.input[0].type.tensor_type
    assert rows.elem_type == onnx.TensorProto.FLOAT
    assert [(d.dim_param, d.dim_value) for d in rows.shape.dim] == [("n", 0), ("", 3)]
    assert [d.dim_value for d in g.output[1].type.tensor_type.shape.dim] == [1, 7]


def test_building_a_scorer_does_not_import_onnx():
    import subprocess
    import sys

    code = ("import sys, numpy as np; from notewell.index.coarse import CoarseScorer; "
            "v = np.random.default_rng(0).standard_normal((300, 64)).astype(np.float32); "
            "s = CoarseScorer(v, threads=1); assert len(s.top(v[0], 10)) >= 10; "
            "print('onnx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_a_scorer_slower_than_the_sign_bits_is_not_used(monkeypatch, caplog):
    import time

    real_top = CoarseScorer.top

    def slow_top(self, query, pool):
        time.sleep(0.02)  # a 4-bit kernel on a slow fallback path
        return real_top(self, query, pool)

    monkeypatch.setattr(CoarseScorer, "top", slow_top)
    cache, ids, vecs = quantized(3000, monkeypatch, measure=True)
    with caplog.at_level(logging.WARNING, logger="notewell.index.vector_cache"):
        cache.prepare()
    assert cache.coarse_rows == 0 and "measured slower" in caplog.text
    assert cache.search(vecs[7], 1)[0][0] == ids[7]


@pytest.mark.parametrize("timing,kept", [((1.2, 1.0), True), ((1.3, 1.0), False)])
def test_a_scorer_within_the_tolerance_is_kept(monkeypatch, timing, kept):
    # A busy moment's noise must not send a daemon to the slower path for good.
    cache = quantized(3000, monkeypatch, measure=True)[0]
    monkeypatch.setattr(VectorCache, "_time_scorer", lambda *args: timing)
    cache.prepare()
    assert (cache.coarse_rows == 3000) is kept


def test_a_scorer_declined_as_slower_is_tried_once_more_later(monkeypatch):
    cache, _, vecs = quantized(3000, monkeypatch, measure=True)
    timings = iter([(1.3, 1.0), (1.0, 1.0)])
    monkeypatch.setattr(VectorCache, "_time_scorer", lambda *args: next(timings))
    cache.prepare()
    assert cache.coarse_rows == 0
    cache.search(vecs[3], 5)  # too soon: no second try yet
    assert cache._scorer_thread is None and cache.coarse_rows == 0
    monkeypatch.setattr(vector_cache, "SCORER_RETRY_S", 0.0)
    cache.search(vecs[3], 5)  # a search after the wait starts it in the background
    thread = cache._scorer_thread
    assert thread is not None
    thread.join(30)
    assert cache.coarse_rows == 3000


def test_a_scorer_declined_twice_is_not_tried_again(monkeypatch):
    cache = quantized(3000, monkeypatch, measure=True)[0]
    monkeypatch.setattr(VectorCache, "_time_scorer", lambda *args: (1.3, 1.0))
    monkeypatch.setattr(vector_cache, "SCORER_RETRY_S", 0.0)
    cache.prepare()
    cache.prepare()
    assert cache.coarse_rows == 0 and not cache._wants_scorer(cache.n, 0)


def test_an_index_loads_its_copy_with_the_scorer_built(tmp_path, monkeypatch):
    """The daemon is warm with the scorer: ``warm_vectors`` builds it with the copy, and
    k-NN through ``Index`` then agrees with sqlite-vec's exact scan on the nearest."""
    import hashlib

    from notewell.index.database import BuildSettings, Index

    monkeypatch.setattr(vector_cache, "COARSE_FROM", 1000)
    monkeypatch.setattr(VectorCache, "_time_scorer", lambda *args: (0.0, 1.0))
    monkeypatch.setitem(VectorCache.__init__.__kwdefaults__, "exact_limit", 500)
    index = Index(str(tmp_path / "index.db"), BuildSettings("fake", 384, "c"))
    index.vector_load_inline = 0
    try:
        vecs = clustered(3000, seed=11, dim=384)
        index.add_embeddings([hashlib.sha256(str(i).encode()).hexdigest() for i in range(3000)],
                             vecs)
        index.warm_vectors(wait=True)
        cache = index._vector_cache()
        assert cache is not None and cache.coarse_rows == 3000
        for q in queries_near(vecs, 10, seed=12):
            want = index.db.execute(
                "SELECT rowid FROM vectors WHERE embedding MATCH ? AND k = 1",
                (q.astype(np.float32).tobytes(),)).fetchone()[0]
            assert index.knn(q, 10)[0][0] == want
    finally:
        index.close()
