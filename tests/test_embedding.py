"""The real model: packaged files, pinned hashes, sensible vectors, no 128-token cut."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest
from notewell.model import files as files_mod
from notewell.model.fake import FakeEmbedder


def test_model_files_come_from_packages_and_match_pins():
    files = files_mod.locate_model_files()
    assert files.model.endswith("model.onnx") and "site-packages" in files.model
    files_mod.verify_model_files(files)


def test_a_changed_model_file_is_refused(tmp_path):
    files = files_mod.locate_model_files()
    bad = tmp_path / "tokenizer.json"
    shutil.copy(files.tokenizer, bad)
    with open(bad, "a") as f:
        f.write(" ")
    with pytest.raises(files_mod.ModelError, match="sha256"):
        files_mod.verify_model_files(dataclasses.replace(files, tokenizer=str(bad)))


def test_vectors_are_normalised_and_paraphrases_are_closer(real_embedder):
    v = real_embedder.embed_batch([
        "How do I delete a branch on the remote?",
        "remove a git branch from origin",
        "banana bread with walnuts and brown sugar",
    ])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3


def test_batching_and_order_do_not_change_vectors(real_embedder):
    texts = ["short", "a somewhat longer sentence about postgres vacuum", "x " * 300]
    together = real_embedder.embed_batch(texts)
    alone = np.stack([real_embedder.embed_batch([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-4)


def test_tokenizer_reads_256_tokens_not_128(real_embedder):
    def token_counts(texts: list[str]) -> list[int]:
        return [len(e.ids) for e in real_embedder._tokenizer.encode_batch(texts)]

    long_text = "word " * 1000
    assert token_counts([long_text]) == [256]
    assert token_counts(["hello world"]) == [4]  # no padding to 128


def test_fake_embedder_is_deterministic():
    a = FakeEmbedder().embed_batch(["postgres vacuum", "banana"])
    b = FakeEmbedder().embed_batch(["postgres vacuum", "banana"])
    assert np.array_equal(a, b)
    assert a[0] @ a[1] < 0.5
