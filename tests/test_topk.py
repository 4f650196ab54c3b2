"""Picking the best of many scores (``notewell.index.topk``)."""

from __future__ import annotations

import numpy as np
import pytest
from notewell.index.topk import best, top


@pytest.mark.parametrize("pool", [1, 10, 200, 999, 4000, 20_000])
def test_best_keeps_every_one_of_the_top_scores(pool):
    rng = np.random.default_rng(pool)
    scores = rng.standard_normal(20_000).astype(np.float32)
    scores[::7] = scores[0]  # ties must not lose rows either
    got = best(scores, pool)
    assert len(got) >= pool and len(set(got.tolist())) == len(got)
    cut = np.sort(scores)[::-1][pool - 1]
    assert set(np.flatnonzero(scores > cut).tolist()) <= set(got.tolist())
    assert len(got) <= 2.5 * pool + 64


@pytest.mark.parametrize("n,k", [(0, 5), (3, 5), (20_000, 0), (20_000, 1), (20_000, 80),
                                 (20_000, 6000)])
def test_top_gives_exactly_the_k_best(n, k):
    rng = np.random.default_rng(n + k)
    scores = rng.standard_normal(n).astype(np.float32)
    scores[: n // 2] = np.round(scores[: n // 2], 1)  # many ties
    got = top(scores, k)
    assert len(got) == min(k, n) and len(set(got.tolist())) == len(got)
    if len(got):
        assert scores[got].min() >= np.sort(scores)[::-1][len(got) - 1]
