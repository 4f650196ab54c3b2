"""A model of the user's own: a folder with ``model.onnx`` and ``tokenizer.json``.

Any sentence-transformers model exported to ONNX (``optimum-cli export onnx --task
feature-extraction``) works. ``ModelFolder`` reads the folder and the settings the user
gave (``[model]`` in ``config.toml``: ``path``, ``pooling``, ``normalize``, ``max_tokens``,
``query_prefix``, ``passage_prefix``); a setting left out comes from the
sentence-transformers files an export may carry beside the model
(``1_Pooling/config.json``, ``sentence_bert_config.json``), else the shipped model's
value. ``fingerprint`` names the model file by its sha256 and every setting that changes
a vector, so the index never mixes two models; the shipped files with the shipped
settings get the shipped model's own fingerprint (pointing ``[model]`` at a copy of them
re-embeds nothing). The sha256 of a large file is remembered by size and modification
time in ``paths.model_dir()``, so a start does not read 500 MB again.

Imports ``model.files``, ``model.embedding`` and ``wire.paths``.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, replace

from notewell.model.embedding import POOLINGS, SHIPPED_FINGERPRINT, EmbedSettings
from notewell.model.files import (
    MAX_TOKENS,
    MODEL_ID,
    MODEL_SHA256,
    TOKENIZER_SHA256,
    ModelError,
    ModelFiles,
    sha256_file,
)
from notewell.wire import paths

MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"


@dataclass(frozen=True)
class ModelFolder:
    """A checked folder: its files, their hashes and the settings in force."""

    path: str
    files: ModelFiles
    model_sha256: str
    tokenizer_sha256: str
    settings: EmbedSettings

    @property
    def shipped(self) -> bool:
        """The shipped model's own files with its own settings."""
        # ``normalize`` changes no stored vector (``EmbedSettings``), so it is not compared.
        return (self.model_sha256 == MODEL_SHA256 and self.tokenizer_sha256 == TOKENIZER_SHA256
                and replace(self.settings, normalize=True) == EmbedSettings())

    @property
    def model_id(self) -> str:
        return MODEL_ID if self.shipped else os.path.basename(self.path.rstrip(os.sep))

    def fingerprint(self) -> str:
        if self.shipped:
            return SHIPPED_FINGERPRINT
        s = self.settings
        text = (f"onnx:{self.model_sha256[:16]}:tokenizer:{self.tokenizer_sha256[:12]}"
                f":tok{s.max_tokens}:{s.pooling}:l2")
        if s.query_prefix or s.passage_prefix:
            text += f":q={json.dumps(s.query_prefix)}:p={json.dumps(s.passage_prefix)}"
        return text


def open_folder(path: str, *, pooling: str | None = None, normalize: bool | None = None,
                max_tokens: int | None = None, query_prefix: str | None = None,
                passage_prefix: str | None = None) -> ModelFolder:
    """The folder at ``path`` with these settings (None: the folder's or the default);
    ``ModelError`` saying what is missing or wrong. Reads files only: the model is loaded
    by ``runtime.custom_embedder``."""
    folder = os.path.abspath(os.path.expanduser(path))
    if not os.path.isdir(folder):
        raise ModelError(f"[model] path {folder} is not a folder: point it at the folder "
                         f"holding {MODEL_FILE} and {TOKENIZER_FILE} (see docs/languages.md, "
                         "\"Your own model\")")
    files = ModelFiles(os.path.join(folder, MODEL_FILE), os.path.join(folder, TOKENIZER_FILE))
    missing = [os.path.basename(f) for f in (files.model, files.tokenizer)
               if not os.path.isfile(f)]
    if missing:
        raise ModelError(f"{folder} has no {' or '.join(missing)}: export the model with "
                         "`optimum-cli export onnx --task feature-extraction` and copy the "
                         "whole output folder (see docs/languages.md, \"Your own model\")")
    found = _folder_defaults(folder)
    pooling = pooling if pooling is not None else found.get("pooling", "mean")
    if pooling not in POOLINGS:
        raise ModelError(f"[model] pooling must be one of {', '.join(POOLINGS)}, not "
                         f"{pooling!r}")
    max_tokens = max_tokens if max_tokens is not None else found.get("max_tokens", MAX_TOKENS)
    if not isinstance(max_tokens, int) or not 8 <= max_tokens <= 8192:
        raise ModelError(f"[model] max_tokens must be a whole number from 8 to 8192, not "
                         f"{max_tokens!r}")
    settings = EmbedSettings(
        pooling=pooling,
        normalize=True if normalize is None else bool(normalize),
        max_tokens=max_tokens,
        query_prefix=query_prefix or "",
        passage_prefix=passage_prefix or "")
    return ModelFolder(folder, files, cached_sha256(files.model), cached_sha256(files.tokenizer),
                       settings)


def _folder_defaults(folder: str) -> dict:
    """Pooling and maximum tokens as the sentence-transformers files beside an export say
    (absent files say nothing)."""
    found: dict = {}
    pooling = _read_json(os.path.join(folder, "1_Pooling", "config.json"))
    if pooling.get("pooling_mode_cls_token"):
        found["pooling"] = "cls"
    elif pooling.get("pooling_mode_mean_tokens"):
        found["pooling"] = "mean"
    st = _read_json(os.path.join(folder, "sentence_bert_config.json"))
    if isinstance(st.get("max_seq_length"), int):
        found["max_tokens"] = st["max_seq_length"]
    return found


def _read_json(path: str) -> dict:
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def cached_sha256(path: str) -> str:
    """The file's sha256, remembered by path, size and modification time."""
    st = os.stat(path)
    key = f"{os.path.abspath(path)}\x00{st.st_size}\x00{st.st_mtime_ns}"
    record = os.path.join(paths.model_dir(), "hashes.json")
    known = _read_json(record)
    if isinstance(known.get(key), str):
        return known[key]
    digest = sha256_file(path)
    if st.st_size >= 1 << 20:  # small files are hashed faster than the record is written
        known[key] = digest
        with contextlib.suppress(OSError):  # a read-only home: hash again next start
            paths.write_atomic(record, json.dumps(known, indent=1).encode())
    return digest
