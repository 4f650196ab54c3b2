"""Filtered k-NN over many allowed chunks is scored from the in-memory copies and agrees
with sqlite-vec's exact scan (float copy: the same chunks and distances; quantized copy:
the best re-scored with their float vectors)."""

from __future__ import annotations

import numpy as np
import pytest
from index_helpers import current_copies
from notewell.index.copies import CopySettings
from notewell.index.database import Index
from notewell.index.schema import BuildSettings
from notewell.notes import Chunk, Note

DIM = 16


def build(tmp_path, n_notes: int, exact_limit: int) -> Index:
    idx = Index(str(tmp_path / "index.db"), BuildSettings("fake", DIM, "c"),
                CopySettings(within_from=10, exact_limit=exact_limit, vector_load_inline=0))
    rng = np.random.default_rng(7)
    for i in range(n_notes):
        vecs = rng.normal(size=(3, DIM)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        hs = [f"h{i}-{j}" for j in range(3)]
        idx.add_embeddings(hs, vecs)
        note = Note(note_id=f"n:{i}", source="n", kind="markdown", title=f"Note {i}",
                    text="x", url=f"file:///{i}", fingerprint=str(i))
        idx.replace_note(note, [(Chunk(j, (), f"passage {i} {j}"), note.url, hs[j])
                                for j in range(3)])
    idx.warm_vectors(wait=True)
    idx.warm_keywords(wait=True)
    return idx


@pytest.mark.parametrize("exact_limit", [10_000, 50])  # float copy; int8 copy
def test_filtered_knn_from_the_copies_matches_sqlite(tmp_path, exact_limit):
    idx = build(tmp_path, 120, exact_limit)
    reads = idx.reads
    assert current_copies(idx).vectors is not None and current_copies(idx).keywords is not None
    rows = [r[0] for r in idx.db.execute("SELECT id FROM notes ORDER BY id")]
    allowed = set(rows[::2])
    q = np.random.default_rng(1).normal(size=DIM).astype(np.float32)
    k = 15
    mine = reads.nearest_chunks(q, k, allowed)
    exact = idx.sql_view().nearest_chunks(q, k, allowed)  # SQLite's exact scan
    assert [c for c, _ in mine] == [c for c, _ in exact]
    assert np.allclose([d for _, d in mine], [d for _, d in exact], atol=1e-5)
    # Below the threshold SQLite answers, as before.
    small = set(rows[:2])
    assert reads.nearest_chunks(q, k, small) == idx.sql_view().nearest_chunks(q, k, small)
    idx.close()
