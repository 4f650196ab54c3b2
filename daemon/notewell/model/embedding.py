"""Turning text into vectors: the ``Embedder`` interface and the ONNX MiniLM embedder.

An embedder has one method that matters, ``embed_batch(texts) -> float32 array (n, dim)``
with L2-normalised rows, plus an ``id`` and ``fingerprint`` that the index records so that
vectors from different models are never mixed. ``OnnxEmbedder`` runs the model file it
is given; which file that is (the shipped one or its int8 rewrite) is ``runtime``'s
choice. Imports ``model.files`` and ``memory``.
"""

from __future__ import annotations

import os
import re
from typing import Protocol

import numpy as np

from notewell.memory import release_memory
from notewell.model.files import (
    DIM,
    MAX_TOKENS,
    MODEL_ID,
    MODEL_SHA256,
    ModelFiles,
)


class Embedder(Protocol):
    id: str
    dim: int

    def fingerprint(self) -> str: ...

    def embed_batch(self, texts: list[str]) -> np.ndarray: ...


# Chosen by measurement on a 2-core Xeon (bench/indexing.py; see README, Performance):
# small batches are faster, not slower (attention tensors of a big batch of long chunks
# fall out of cache): 29-30 chunks/s at 1-2 texts per run, 17-21 at 16, 15-17 at 32, and
# peak memory 276 MB instead of 650 MB at 16.
BATCH_SIZE = 2
SPIN = True


def default_threads() -> int:
    return min(4, os.cpu_count() or 1)


def default_providers() -> list[str]:
    """CPU, or Core ML first on macOS when ``NOTEWELL_COREML=1`` and onnxruntime has it
    (``bench/indexing.py`` measures both where it is available)."""
    if os.environ.get("NOTEWELL_COREML") == "1":
        import onnxruntime as ort

        if "CoreMLExecutionProvider" in ort.get_available_providers():
            return ["CoreMLExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


class OnnxEmbedder:
    """all-MiniLM-L6-v2 on onnxruntime: mean pooling over tokens, then L2 normalisation,
    running the model file it is given."""

    id = MODEL_ID
    dim = DIM

    def __init__(
        self,
        files: ModelFiles,
        *,
        threads: int | None = None,
        batch_size: int = BATCH_SIZE,
        arena: bool = False,
        spin: bool = SPIN,
        providers: list[str] | None = None,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.files = files  # checked by whoever chose them (``runtime.default_embedder``)
        self.batch_size = batch_size
        self._tokenizer = Tokenizer.from_file(files.tokenizer)
        # As shipped, tokenizer.json pads and truncates everything to 128 tokens.
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads or default_threads()
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Measured (bench/indexing.py): with the arena, one batch of long chunks leaves the
        # daemon at 540 MB resident for good; without it, 245 MB, at no measurable cost.
        opts.enable_cpu_mem_arena = arena
        # Worker threads that spin between the ~100 operators of one run instead of
        # sleeping take a query from 3.3 to 2.3 ms (a third of a keystroke's daemon time);
        # ``force_spinning_stop`` parks them as soon as the run ends, so an idle daemon
        # burns nothing (measured: 1 ms of CPU in the 0.5 s after a query, 27 without it).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        if spin:
            opts.add_session_config_entry("session.force_spinning_stop", "1")
        self._session = ort.InferenceSession(
            files.model, sess_options=opts, providers=providers or default_providers()
        )
        # Folding the int8 weights into float at load leaves ~60 MB of freed temporaries.
        release_memory()

    def fingerprint(self) -> str:
        # The same for the shipped file and its int8 rewrite: the same weights, vectors
        # within cosine 0.995 (checked before the rewrite is used), as across execution
        # providers. A machine that falls back to the shipped file must not re-embed.
        return f"{self.id}:onnx-int8:{MODEL_SHA256[:16]}:tok{MAX_TOKENS}:mean:l2"

    def knows(self, word: str) -> bool:
        """Whether ``word`` is a whole word of the model's vocabulary: a real word the
        model reads as itself (typo correction leaves such words alone)."""
        return self._tokenizer.token_to_id(word.lower()) is not None

    def token_counts(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self._tokenizer.encode_batch(texts)]

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Vectors for ``texts`` in order. Batches are sorted by length so padding stays
        small (a batch of 64 long chunks would otherwise peak near 3 GB)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch([_clean(t) for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._run([encodings[i].ids for i in idx])
        if len(texts) > 1:
            release_memory()
        return out

    def _run(self, batch_ids: list[list[int]]) -> np.ndarray:
        width = max(len(ids) for ids in batch_ids)
        ids = np.zeros((len(batch_ids), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, seq in enumerate(batch_ids):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        summed = (hidden * mask[..., None]).sum(axis=1)
        mean = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        return normalise(mean.astype(np.float32))


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _clean(text: str) -> str:
    return _CONTROL.sub(" ", text.encode("utf-8", "replace").decode("utf-8"))


def normalise(v: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return v / np.maximum(norms, 1e-12)

