"""Which model file runs, decided once per machine and recorded; the default embedder.

The int8 rewrite (``rewrite``) runs whenever it builds, loads and gives the shipped file's
vectors (cosine >= ``MIN_COSINE`` on a few probe texts); otherwise the shipped file runs,
and the record says why (``notewell doctor`` shows it). The choice is made once per
shipped file, rewrite revision and onnxruntime version, written as a small JSON beside the
rewrite in ``paths.model_dir()``, and never by timing: the same files give the same
choice on every machine and every start. Imports the rest of ``model``, ``memory`` and
``wire.paths``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os

from notewell.memory import release_memory
from notewell.model.custom import ModelFolder
from notewell.model.embedding import Embedder, OnnxEmbedder
from notewell.model.files import (
    MODEL_SHA256,
    ModelError,
    ModelFiles,
    locate_model_files,
    sha256_file,
    verify_model_files,
)
from notewell.model.rewrite import BLOCK, REVISION, rewrite
from notewell.wire import paths

log = logging.getLogger(__name__)

MIN_COSINE = 0.995  # the rewrite's vectors against the shipped file's, on ``_PROBE_TEXTS``
# How the choice is made; a record made another way is made again. 2: by the vectors
# alone (notewell before it also timed both files, and kept a "slower here" verdict).
RULE = 2

_PROBE_TEXTS = [
    "postgres vacuum",
    "how do I undo the last commit but keep my changes",
    "Banana bread > Ingredients\nThree ripe bananas, flour, sugar and butter. Bake for an "
    "hour at 175C, then let it cool on a rack before slicing. " * 4,
]


def default_embedder() -> Embedder:
    """The embedder notewell runs: the shipped files, checked against their pins, through
    the recorded choice of file."""
    files = locate_model_files()
    verify_model_files(files)
    return OnnxEmbedder(ModelFiles(runtime_model(files.model, files.tokenizer, MODEL_SHA256),
                                   files.tokenizer))


def custom_embedder(folder: ModelFolder) -> OnnxEmbedder:
    """The embedder for a model folder (``custom.open_folder``), loaded and tried on one
    text; ``ModelError`` saying what is wrong when it does not load or run."""
    files = folder.files
    try:
        running = runtime_model(files.model, files.tokenizer, folder.model_sha256)
        embedder = OnnxEmbedder(ModelFiles(running, files.tokenizer), settings=folder.settings,
                                model_id=folder.model_id, fingerprint=folder.fingerprint())
        vectors = embedder.embed_queries(["notewell"])
    except ModelError:
        raise
    except Exception as e:  # onnxruntime's and tokenizers' own errors, for one
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ModelError(f"the model in {folder.path} does not load or run: "
                         f"{type(e).__name__}: {first[:300]} -> export it again with "
                         "`optimum-cli export onnx --task feature-extraction` and copy the "
                         "whole folder (see docs/languages.md, \"Your own model\")") from None
    if vectors.shape != (1, embedder.dim) or not vectors.any():
        raise ModelError(f"the model in {folder.path} gave vectors of shape {vectors.shape}, "
                         f"expected (1, {embedder.dim})")
    return embedder


def runtime_model(shipped: str, tokenizer: str, shipped_sha256: str,
                  directory: str | None = None) -> str:
    """The model file to run: the rewrite when it was chosen on this machine, else
    ``shipped``. The first call (per shipped file, revision and onnxruntime version) builds
    and checks the rewrite, which takes about a second; later calls read the choice."""
    import onnxruntime

    dest, record = choice_files(shipped_sha256, directory)
    choice = _read_choice(record)
    if (choice is None or choice.get("onnxruntime") != onnxruntime.__version__
            or choice.get("rule") != RULE):
        _remove_older(dest)
        choice = _choose(shipped, tokenizer, dest)
        choice.update(onnxruntime=onnxruntime.__version__, rule=RULE)
        try:
            paths.write_atomic(record, json.dumps(choice, indent=1).encode())
        except OSError as e:  # a read-only home: choose again next start
            log.warning("cannot record the model choice in %s: %s", record, e)
    if choice.get("use") == "rewrite" and os.path.exists(dest):
        if sha256_file(dest) == choice.get("sha256"):
            return dest
        log.warning("%s changed since it was built; using the shipped model (delete %s to "
                    "rebuild)", dest, record)
    return shipped


def recorded_choice(shipped_sha256: str, directory: str | None = None) -> dict | None:
    """What ``runtime_model`` chose on this machine (``use``, ``min_cosine``, and ``why``
    for the shipped file), or None before its first run."""
    return _read_choice(choice_files(shipped_sha256, directory)[1])


def choice_files(shipped_sha256: str, directory: str | None) -> tuple[str, str]:
    key = f"minilm-{shipped_sha256[:16]}-r{REVISION}-b{BLOCK}"
    directory = directory or paths.model_dir()
    return os.path.join(directory, key + ".onnx"), os.path.join(directory, key + ".json")


def _remove_older(dest: str) -> None:
    """Delete rewrites of the same shipped file by other revisions (24 MB each)."""
    folder, name = os.path.split(dest)
    prefix = name.split("-r")[0] + "-r"  # minilm-<sha16>-r
    keep = {name, name[: -len(".onnx")] + ".json"}
    try:
        found = os.listdir(folder)
    except OSError:
        return
    for other in found:
        if (other.startswith(prefix) and other not in keep
                and other.endswith((".onnx", ".json"))):
            with contextlib.suppress(OSError):  # in use elsewhere, or gone already
                os.remove(os.path.join(folder, other))


def _read_choice(record: str) -> dict | None:
    try:
        with open(record, "rb") as f:
            found = json.loads(f.read())
        return found if isinstance(found, dict) else None
    except (OSError, ValueError):
        return None


def _choose(shipped: str, tokenizer: str, dest: str) -> dict:
    """Build the rewrite and keep it if it loads and its vectors agree with the shipped
    file's; the record says why not otherwise. Never timed: the same files give the same
    choice on every machine and every start."""
    try:
        rewrite(shipped, dest)
    except ImportError:
        return {"use": "shipped", "why": "the onnx package is not installed"}
    except Exception as e:  # any failure leaves the shipped file in use
        return {"use": "shipped", "why": f"rewrite failed: {e}"}
    try:
        embedders = {name: OnnxEmbedder(ModelFiles(path, tokenizer))
                     for name, path in (("shipped", shipped), ("rewrite", dest))}
        vectors = {name: e.embed_batch(_PROBE_TEXTS) for name, e in embedders.items()}
        del embedders
        release_memory()  # the shipped file's float weights
    except Exception as e:  # onnxruntime without the 8-bit kernels, for one
        return {"use": "shipped", "why": f"the rewrite does not run here: {e}"}
    cosine = float((vectors["shipped"] * vectors["rewrite"]).sum(axis=1).min())
    out = {"min_cosine": round(cosine, 5)}
    if cosine < MIN_COSINE:
        return {"use": "shipped", "why": f"vectors differ (cosine {cosine:.4f})", **out}
    log.info("model: int8 rewrite chosen (cosine %.4f to the shipped file)", cosine)
    return {"use": "rewrite", "sha256": sha256_file(dest), **out}
