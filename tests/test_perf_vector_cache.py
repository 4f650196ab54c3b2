"""The in-memory vector copy behind ``Index.knn`` on large indexes: exact where it claims
to be, close to exact where it quantizes, and never out of step with the index file."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from helpers import vectors_by_id
from index_helpers import current_copies
from notewell.index.copies import CopySettings
from notewell.index.database import Index
from notewell.index.schema import BuildSettings
from notewell.index.vector_cache import VectorCache, hamming, int8_codes, nearest_rows, sign_bits

DIM = 64


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def clustered(n: int, seed: int = 0, dim: int = DIM) -> np.ndarray:
    """Vectors around 40 centres: neighbours are clearly nearer than the rest, as with
    real embeddings (uniform random vectors have no near neighbours at all)."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((40, dim)))
    return unit(centres[rng.integers(0, 40, n)] + 0.6 * rng.standard_normal((n, dim)) /
                np.sqrt(dim))


def exact_knn(ids: np.ndarray, vecs: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    return ids[np.argsort(-(vecs @ q), kind="stable")[:k]].tolist()


def test_codes_round_trip_and_hamming_counts_differing_signs():
    v = unit(np.random.default_rng(1).standard_normal((5, 70)))  # not a multiple of 64
    bits = sign_bits(v)
    assert bits.dtype == np.uint64 and bits.shape == (5, 2)
    flipped = v.copy()
    flipped[0, :3] *= -1
    assert hamming(np.ascontiguousarray(sign_bits(flipped).T), bits[0]).tolist()[0] == 3
    codes, scale = int8_codes(v)
    assert np.abs(codes.astype(np.float32) * scale[:, None] - v).max() <= scale.max() / 2 + 1e-7


def test_nearest_rows_picks_the_smallest_distances():
    dist = np.random.default_rng(3).integers(0, 385, 50_000).astype(np.uint16)
    for pool in (1, 10, 777, 5000):
        got = nearest_rows(dist, pool)
        assert len(got) == pool and len(set(got.tolist())) == pool
        assert np.array_equal(np.sort(dist[got]), np.sort(dist)[:pool])


def test_exact_layout_matches_brute_force():
    vecs = clustered(3000)
    ids = np.arange(10, 3010, dtype=np.int64)
    cache = VectorCache(DIM, exact_limit=10_000)
    cache.append(ids, vecs)
    assert not cache.quantized
    for q in clustered(20, seed=5):
        got = cache.search(q, 15)
        assert [i for i, _ in got] == exact_knn(ids, vecs, q, 15)
        want = 1 - vecs[[i - 10 for i, _ in got]] @ q
        assert np.allclose([d for _, d in got], want, atol=1e-6)


def test_quantized_layout_keeps_recall_and_near_exact_distances():
    dim = 384  # the model's: the sign bits need the dimensions to rank well
    vecs = clustered(20_000, seed=2, dim=dim)
    ids = np.arange(1, 20_001, dtype=np.int64)
    cache = VectorCache(dim, exact_limit=1000, min_candidates=2000)
    for start in range(0, 20_000, 5000):  # appended in parts, switching layout on the way
        cache.append(ids[start:start + 5000], vecs[start:start + 5000])
    assert cache.quantized and cache.n == 20_000
    assert cache.nbytes() < 20_000 * (dim + 48 + 8 + 4) * 1.6  # no float32 copy kept
    recalls = []
    rng = np.random.default_rng(9)
    for q in unit(vecs[:30] + 0.5 * rng.standard_normal((30, dim)) / np.sqrt(dim)):
        got = cache.search(q, 10)
        exact = exact_knn(ids, vecs, q, 10)
        recalls.append(len({i for i, _ in got} & set(exact)) / 10)
        true = 1 - vecs[[i - 1 for i, _ in got]] @ q
        assert np.abs(np.array([d for _, d in got]) - true).max() < 5e-3
        assert [d for _, d in got] == sorted(d for _, d in got)
    assert np.mean(recalls) >= 0.95


def test_sign_bits_are_taken_around_the_corpus_mean():
    """Embeddings share a common direction (MiniLM's mean vector has norm ~0.3): raw sign
    bits spend dimensions on it, bits around the mean rank neighbours better."""
    dim = 384
    rng = np.random.default_rng(6)
    common = unit(rng.standard_normal(dim)) * 3 / np.sqrt(dim) * 24
    vecs = unit(clustered(20_000, seed=7, dim=dim) + common)
    ids = np.arange(1, 20_001, dtype=np.int64)
    queries = unit(vecs[:30] + 0.5 * rng.standard_normal((30, dim)) / np.sqrt(dim))

    def recall(centred: bool) -> float:
        cache = VectorCache(dim, exact_limit=1000, oversample=1, min_candidates=200,
                            share=10**9, center=None if centred else np.zeros(dim))
        cache.append(ids, vecs)
        if centred:
            assert np.abs(cache.center - vecs.mean(axis=0)).max() < 1e-5
        return float(np.mean([len({i for i, _ in cache.search(q, 10)} &
                                  set(exact_knn(ids, vecs, q, 10))) / 10 for q in queries]))

    centred, raw = recall(True), recall(False)
    assert centred >= 0.75 and centred > raw + 0.15, (centred, raw)


def test_a_large_search_split_over_two_threads_gives_the_same_answer():
    vecs = clustered(6000, seed=4, dim=384)
    queries = unit(vecs[:5] + 0.3 * np.random.default_rng(1).standard_normal((5, 384)))
    found = []
    for parallel_from in (10**9, 1000):  # one thread, then two
        cache = VectorCache(384, exact_limit=1000, min_candidates=500,
                            parallel_from=parallel_from)
        cache.append(np.arange(1, 6001), vecs)
        found.append([cache.search(q, 20) for q in queries])
    assert found[1] == found[0]


def test_empty_and_small_k():
    cache = VectorCache(DIM)
    assert cache.search(np.ones(DIM), 5) == []
    cache.append(np.array([7]), unit(np.ones((1, DIM))))
    assert cache.search(np.ones(DIM), 5)[0][0] == 7
    assert cache.search(np.ones(DIM), 0) == []


# -- through Index --------------------------------------------------------------------------


def hashes(start: int, n: int) -> list[str]:
    return [hashlib.sha256(str(i).encode()).hexdigest() for i in range(start, start + n)]


def open_index(tmp_path, **settings) -> Index:
    # As a large index: the copy loads in the background.
    return Index(str(tmp_path / "index.db"), BuildSettings("fake", DIM, "c"),
                 CopySettings(vector_load_inline=0, **settings))


@pytest.fixture
def index(tmp_path):
    idx = open_index(tmp_path)
    yield idx
    idx.close()


def sqlite_vec_knn(index: Index, q: np.ndarray, k: int) -> list[tuple[int, float]]:
    rows = index.db.execute(
        "SELECT rowid, distance FROM vectors WHERE embedding MATCH ? AND k = ? "
        "ORDER BY distance", (q.astype(np.float32).tobytes(), k))
    return [(r[0], r[1]) for r in rows]


def test_index_knn_from_the_copy_agrees_with_sqlite_vec(index):
    vecs = clustered(500, seed=3)
    index.add_embeddings(hashes(0, 500), vecs)
    index.warm_vectors(wait=True)
    assert current_copies(index).vectors is not None
    for q in clustered(10, seed=4):
        got = index.reads.knn(q, 12)
        want = sqlite_vec_knn(index, q, 12)
        assert [i for i, _ in got] == [i for i, _ in want]
        assert np.allclose([d for _, d in got], [d for _, d in want], atol=1e-5)


def test_new_vectors_are_found_at_once_and_deleted_ones_never(index):
    vecs = clustered(300, seed=6)
    index.add_embeddings(hashes(0, 300), vecs)
    index.warm_vectors(wait=True)
    cache = index.copies.vector_copy
    # An edit adds a vector: the next query pulls it into the same copy.
    probe = unit(np.random.default_rng(8).standard_normal(DIM))
    index.add_embeddings(hashes(1000, 1), probe[None, :])
    new_id = index.db.execute("SELECT max(id) FROM embeddings").fetchone()[0]
    assert index.reads.knn(probe, 1)[0][0] == new_id
    assert index.copies.vector_copy is cache and cache.max_id == new_id
    # Pruning deletes vectors no chunk uses (here: all), and ids are then reused: the copy
    # must not answer with the old vectors under the new ids.
    assert index.prune_embeddings() == 301
    other = unit(-probe)
    index.add_embeddings(hashes(2000, 1), other[None, :])
    assert index.db.execute("SELECT id FROM embeddings").fetchall() == [(1,)]
    assert index.reads.knn(other, 3) == [(1, pytest.approx(0.0, abs=1e-6))]
    index.warm_vectors(wait=True)
    assert index.copies.vector_copy is not cache
    assert index.reads.knn(other, 3) == [(1, pytest.approx(0.0, abs=1e-6))]


def test_small_and_in_memory_indexes_read_the_copy_on_first_use(tmp_path):
    for path in (":memory:", str(tmp_path / "small.db")):
        idx = Index(path, BuildSettings("fake", DIM, "c"))
        idx.add_embeddings(hashes(0, 50), clustered(50))
        q = clustered(1, seed=5)[0]
        want = sqlite_vec_knn(idx, q, 5)
        assert idx.reads.knn(q, 5) == [(i, pytest.approx(d, abs=1e-5)) for i, d in want]
        copy = idx.copies.vector_copy
        assert copy is not None and copy.n == 50  # no thread, no wait
        idx.close()


def test_vectors_by_id_match_the_stored_ones_in_both_layouts(index):
    vecs = clustered(400, seed=9)
    index.add_embeddings(hashes(0, 400), vecs)
    ids = [r[0] for r in index.db.execute("SELECT rowid FROM vectors ORDER BY rowid")]
    index.warm_vectors(wait=True)
    wanted = [ids[7], ids[300], 10**9]
    got = vectors_by_id(wanted, index.reads.vector_matrix(wanted))
    assert set(got) == {ids[7], ids[300]}  # an unknown id is simply absent
    assert np.array_equal(got[ids[300]], vecs[300].astype(np.float32))
    index.copies.settings.vectors = False  # from SQLite, as while a large copy loads
    found, matrix = index.reads.vector_matrix([ids[300], 10**9, ids[7], ids[300]])
    assert found.tolist() == [True, False, True, True]
    assert np.array_equal(matrix, vecs[[300, 7, 300]].astype(np.float32))
    index.copies.settings.vectors = True
    quantized = VectorCache(DIM, exact_limit=0)
    quantized.append(np.asarray(ids), vecs)
    approx = vectors_by_id([ids[300]], quantized.matrix([ids[300]]))[ids[300]]
    assert float(approx @ vecs[300]) == pytest.approx(1.0, abs=2e-3)


def test_vectors_by_id_when_rows_arrive_out_of_order():
    cache = VectorCache(DIM)
    vecs = clustered(3, seed=2)
    cache.append(np.array([30, 10, 20]), vecs)
    got = vectors_by_id([10, 20, 30, 40], cache.matrix([10, 20, 30, 40]))
    assert sorted(got) == [10, 20, 30]
    assert np.array_equal(got[10], vecs[1].astype(np.float32))


def test_a_bulk_sync_is_caught_up_in_place(index):
    pull_inline = index.copies.settings.vector_pull_inline
    index.add_embeddings(hashes(0, 300), clustered(300))
    index.warm_vectors(wait=True)
    cache = index.copies.vector_copy
    index.add_embeddings(hashes(5000, pull_inline + 100), clustered(pull_inline + 100,
                                                                     seed=11))
    probe = unit(np.random.default_rng(12).standard_normal(DIM))
    index.add_embeddings(hashes(9000, 1), probe[None, :])
    new_id = index.db.execute("SELECT max(id) FROM embeddings").fetchone()[0]
    assert len(index.reads.knn(probe, 5)) == 5  # answered at once, while the rest loads
    index.warm_vectors(wait=True)
    assert index.reads.knn(probe, 1)[0][0] == new_id
    assert index.copies.vector_copy is cache and cache.n == 300 + pull_inline + 101



def test_a_large_quantized_copy_gives_exact_distances_for_its_best(tmp_path):
    """From ``exact_head_from`` vectors, the best few are re-scored with their float
    vectors (int8 scores cannot order near-ties): their order and distances are
    sqlite-vec's."""
    index = open_index(tmp_path, exact_limit=0, exact_head_from=1000, exact_head=15)
    base = clustered(40, seed=8)
    rng = np.random.default_rng(8)
    # Near-copies of a few passages, as a large corpus of similar notes has them.
    vecs = unit(np.repeat(base, 30, axis=0) + 0.02 * rng.standard_normal((1200, DIM)))
    index.add_embeddings(hashes(0, 1200), vecs)
    index.warm_vectors(wait=True)
    assert current_copies(index).vectors.quantized
    queries = unit(base[:8] + 0.05 * rng.standard_normal((8, DIM)))
    for q in queries:
        for k in (5, 30):  # a k below the head still draws on the head's candidates
            got = index.reads.knn(q, k)[:5]
            want = sqlite_vec_knn(index, q, 5)
            assert [i for i, _ in got] == [i for i, _ in want]
            assert np.allclose([d for _, d in got], [d for _, d in want], atol=1e-6)
    index.copies.settings.exact_head_from = 10**9  # without: int8 order
    misses = sum([i for i, _ in index.reads.knn(q, 5)]
                 != [i for i, _ in sqlite_vec_knn(index, q, 5)] for q in queries)
    assert misses > 0
    index.close()
