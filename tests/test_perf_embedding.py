"""The speed and memory settings of the ONNX embedder change nothing in its vectors, the
shipped int8 model stays within cosine 0.99 of the real all-MiniLM-L6-v2, and a batch's
memory goes back to the system afterwards.

The real model's vectors for ``TEXTS`` are recorded in ``data/reference_minilm.json``: the
float all-MiniLM-L6-v2 (its ``model.safetensors``), computed once in numpy in float64 by
the former ``bench/reference_model.py`` (git history, commit f43c314)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from helpers import REPO

REFERENCE = json.loads((REPO / "tests" / "data" / "reference_minilm.json").read_text())
TEXTS = REFERENCE["texts"]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row by row; both sides normalised here, whatever they were."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)


@pytest.mark.parametrize("which", ["runs", "shipped"])
def test_model_is_within_cosine_099_of_the_float_reference(real_embedder, which):
    """Both what runs (the int8 rewrite, see notewell.model.rewrite) and the shipped file."""
    from notewell.model.embedding import OnnxEmbedder
    from notewell.model.files import locate_model_files

    embedder = real_embedder if which == "runs" else OnnxEmbedder(locate_model_files())
    cos = cosines(np.array(REFERENCE["vectors"]), embedder.embed_batch(TEXTS))
    assert cos.min() >= 0.99, cos


def test_reference_tells_a_different_model_apart(real_embedder):
    shuffled = real_embedder.embed_batch(TEXTS)[::-1]
    assert cosines(np.array(REFERENCE["vectors"]), shuffled).min() < 0.9


def test_batch_size_and_threads_do_not_change_vectors(real_embedder):
    from notewell.model.embedding import OnnxEmbedder

    base = real_embedder.embed_batch(TEXTS)
    other = OnnxEmbedder(real_embedder.files, threads=1, batch_size=1)
    assert np.abs(other.embed_batch(TEXTS) - base).max() < 1e-4
    assert other.fingerprint() == real_embedder.fingerprint()


@pytest.mark.bench  # resident memory against a figure: make bench
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_batch_of_long_chunks_does_not_stay_resident():
    probe = (
        "import sys, threading\n"
        f"sys.path.insert(0, {str(REPO / 'daemon')!r})\n"
        "from notewell.model.runtime import default_embedder\n"
        "def rss():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmRSS'):\n"
        "            return int(line.split()[1]) // 1024\n"
        "e = default_embedder()\n"
        "e.embed_batch(['warm up'])\n"
        "before = rss()\n"
        # The daemon embeds on its sync thread, where glibc keeps freed memory longest;
        # without the trim, three batches left 680 MB behind.
        "for n in (100, 200, 300):\n"
        "    t = threading.Thread(target=e.embed_batch, args=(['word ' * n] * 16,))\n"
        "    t.start(); t.join()\n"
        "print(before, rss())\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True)
    before, after = map(int, out.stdout.split())
    # Activations for 16 x 256 tokens take ~300 MB while the batch runs.
    assert after - before < 80, (before, after)
    assert before < 220, before  # the session itself, after load-time temporaries
