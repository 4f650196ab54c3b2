"""Turning text into vectors: the ``Embedder`` interface and the ONNX embedder.

An embedder has one method that matters, ``embed_batch(texts) -> float32 array (n, dim)``
with L2-normalised rows (passages), plus an ``id`` and ``fingerprint`` that the index
records so that vectors from different models are never mixed; ``embed_queries`` embeds
queries where a model reads them differently (e5's ``query: `` prefix). ``OnnxEmbedder``
runs the model file it is given, with the ``EmbedSettings`` that differ between
sentence-transformers models (pooling, maximum tokens, prefixes); its dimension comes from
the model's output. Which file runs (the shipped one or its int8 rewrite) is ``runtime``'s
choice. Imports ``model.files`` and ``memory``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from notewell.memory import release_memory
from notewell.model.files import (
    MAX_TOKENS,
    MODEL_ID,
    MODEL_SHA256,
    ModelError,
    ModelFiles,
)


class Embedder(Protocol):
    id: str
    dim: int

    def fingerprint(self) -> str: ...

    def embed_batch(self, texts: list[str]) -> np.ndarray: ...


def embed_queries(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Query vectors: ``embed_queries`` where the embedder has one (a model with a query
    prefix), else ``embed_batch`` (test doubles, which read queries as passages)."""
    method = getattr(embedder, "embed_queries", None)
    return method(texts) if method is not None else embedder.embed_batch(texts)


# The shipped model's fingerprint (its file and its int8 rewrite alike: see ``fingerprint``).
SHIPPED_FINGERPRINT = f"{MODEL_ID}:onnx-int8:{MODEL_SHA256[:16]}:tok{MAX_TOKENS}:mean:l2"
POOLINGS = ("mean", "cls")
# The inputs a BERT- or XLM-R-shaped export may declare; the loader feeds those it has.
KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# Outputs read, in order of preference: token vectors to pool, or a pooled vector.
TOKEN_OUTPUTS = ("last_hidden_state", "token_embeddings")
POOLED_OUTPUTS = ("sentence_embedding",)


@dataclass(frozen=True)
class EmbedSettings:
    """What differs between sentence-transformers models beyond their files (the shipped
    model's values are the defaults). ``normalize`` is recorded as configured, but vectors
    are stored at unit length either way: every score notewell computes is a cosine, for
    which a vector's length does not count (and the in-memory copy's exact layout relies
    on unit rows)."""

    pooling: str = "mean"  # mean | cls
    normalize: bool = True
    max_tokens: int = MAX_TOKENS
    query_prefix: str = ""
    passage_prefix: str = ""


# Chosen by measurement on a 2-core Xeon (bench/indexing.py; bench/README.md):
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
    """A sentence-transformers model on onnxruntime (all-MiniLM-L6-v2 by default): pooling
    over tokens (mean, or the first token's vector), then L2 normalisation, running the
    model file it is given. ``fingerprint`` is given for any model but the shipped one."""

    def __init__(
        self,
        files: ModelFiles,
        *,
        settings: EmbedSettings | None = None,
        model_id: str = MODEL_ID,
        fingerprint: str | None = None,
        threads: int | None = None,
        batch_size: int = BATCH_SIZE,
        arena: bool = False,
        spin: bool = SPIN,
        providers: list[str] | None = None,
    ) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.files = files  # checked by whoever chose them (``runtime.default_embedder``)
        self.settings = settings or EmbedSettings()
        self.id = model_id
        self._fingerprint = fingerprint
        self.max_tokens = self.settings.max_tokens
        self.batch_size = batch_size
        self._tokenizer = Tokenizer.from_file(files.tokenizer)
        self._pad_id = int((self._tokenizer.padding or {}).get("pad_id") or 0)
        # As shipped, tokenizer.json pads and truncates everything to 128 tokens.
        self._tokenizer.enable_truncation(self.max_tokens)
        self._tokenizer.no_padding()
        # The tokenizer's thread pool starts with its first batch and, on Linux, takes the
        # priority of the thread that starts it: started here, with the model, it runs
        # queries at theirs, not at the background sync's (notewell.priority).
        self._tokenizer.encode_batch([""])
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
        self.inputs, self.output, self.dim = _signature(self._session, files.model)
        # Folding the int8 weights into float at load leaves ~60 MB of freed temporaries.
        release_memory()

    def fingerprint(self) -> str:
        # The same for the shipped file and its int8 rewrite: the same weights, vectors
        # within cosine 0.995 (checked before the rewrite is used), as across execution
        # providers. A machine that falls back to the shipped file must not re-embed.
        return self._fingerprint if self._fingerprint is not None else SHIPPED_FINGERPRINT

    def knows(self, word: str) -> bool:
        """Whether ``word`` is a whole word of the model's vocabulary: a real word the
        model reads as itself (typo correction leaves such words alone)."""
        return self._tokenizer.token_to_id(word.lower()) is not None

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """Passage vectors for ``texts`` in order (with the passage prefix, if any)."""
        return self._embed(texts, self.settings.passage_prefix)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        """Query vectors for ``texts`` in order (with the query prefix, if any)."""
        return self._embed(texts, self.settings.query_prefix)

    def _embed(self, texts: list[str], prefix: str) -> np.ndarray:
        """Batches are sorted by length so padding stays small (a batch of 64 long chunks
        would otherwise peak near 3 GB)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch([prefix + _clean(t) for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._run([encodings[i].ids for i in idx])
        if len(texts) > 1:
            release_memory()
        return out

    def _run(self, batch_ids: list[list[int]]) -> np.ndarray:
        width = max(len(ids) for ids in batch_ids)
        ids = np.full((len(batch_ids), width), self._pad_id, dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, seq in enumerate(batch_ids):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (out,) = self._session.run([self.output], {k: feeds[k] for k in self.inputs})
        if out.ndim == 2:  # the export pooled already
            pooled = out
        elif self.settings.pooling == "cls":
            pooled = out[:, 0]
        else:
            summed = (out * mask[..., None]).sum(axis=1)
            pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        return normalise(pooled.astype(np.float32))


def _signature(session, where: str) -> tuple[list[str], str, int]:
    """The inputs to feed, the output to read and its dimension, from the graph's own
    declarations; ``ModelError`` naming what is missing when the graph is not one the
    loader can feed."""
    inputs = [i.name for i in session.get_inputs()]
    unknown = [name for name in inputs if name not in KNOWN_INPUTS]
    if unknown or "input_ids" not in inputs:
        raise ModelError(
            f"{where} takes inputs {inputs}; notewell feeds input_ids, attention_mask and "
            "token_type_ids (input_ids required): export the model with "
            "`optimum-cli export onnx --task feature-extraction` (see docs/languages.md, "
            "\"Your own model\")")
    outputs = {o.name: o for o in session.get_outputs()}
    name = next((n for n in TOKEN_OUTPUTS + POOLED_OUTPUTS if n in outputs), None)
    if name is None:
        raise ModelError(
            f"{where} has outputs {sorted(outputs)}; notewell reads last_hidden_state "
            "(or token_embeddings, or sentence_embedding): export it with "
            "`--task feature-extraction` (see docs/languages.md, \"Your own model\")")
    shape = outputs[name].shape
    want_rank = 3 if name in TOKEN_OUTPUTS else 2
    if len(shape) != want_rank:
        raise ModelError(f"{where}: output {name} has shape {shape}, expected "
                         f"{want_rank} dimensions")
    dim = shape[-1]
    if not isinstance(dim, int) or dim <= 0:
        # A symbolic last dimension: one tiny run says what it is.
        probe = {"input_ids": np.ones((1, 2), np.int64), "attention_mask": np.ones((1, 2),
                 np.int64), "token_type_ids": np.zeros((1, 2), np.int64)}
        dim = int(session.run([name], {k: probe[k] for k in inputs})[0].shape[-1])
    return inputs, name, int(dim)


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _clean(text: str) -> str:
    return _CONTROL.sub(" ", text.encode("utf-8", "replace").decode("utf-8"))


def normalise(v: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return v / np.maximum(norms, 1e-12)

