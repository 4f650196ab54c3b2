"""The models ``notewell model use`` can switch to, and their downloaded folders.

Each entry names a published ONNX export on the Hugging Face hub (repository, pinned
revision, files and their approximate sizes), the settings notewell runs it with
(pooling, prefixes, maximum tokens) and what it is for, with a published retrieval
figure and its source. The shipped all-MiniLM-L6-v2 downloads nothing. A downloaded
model lives in ``<model dir>/<name>/``: ``model.onnx``, ``tokenizer.json`` and
``manifest.json``, which records where each file came from, its size and its sha256, and
is marked complete only once every file arrived whole and the model passed the
functional check (``check``: it loads, gives the stated dimension, and ranks a relevant
probe passage above an unrelated one). ``installed(name)`` is that folder, or None;
``embedder(name)`` loads a catalog model for a command that compares models.

The hub's address is ``https://huggingface.co`` unless ``NOTEWELL_MODEL_HUB`` names
another (a mirror, or a test's server on 127.0.0.1); ``install`` also takes it as
``base_url``. Imports ``config`` (``ModelConfig``), ``model.files``, ``model.embedding``,
``model.custom``, ``model.runtime``, ``model.download`` and ``wire.paths``.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

from notewell.config import ModelConfig
from notewell.model import download
from notewell.model.custom import MODEL_FILE, TOKENIZER_FILE, cached_sha256, open_folder
from notewell.model.embedding import Embedder, embed_queries
from notewell.model.files import DIM, MAX_TOKENS, MODEL_ID, ModelError
from notewell.model.runtime import custom_embedder, default_embedder
from notewell.wire import paths

HUB = "https://huggingface.co"
HUB_ENV = "NOTEWELL_MODEL_HUB"
MANIFEST = "manifest.json"

# The functional check: the query must be closer to the passage it is about than to the
# unrelated one by at least ``PROBE_MARGIN`` in cosine (real models clear it by far more).
PROBE_QUERY = "how long do I bake banana bread"
PROBE_RELEVANT = ("Banana bread: mash three ripe bananas with butter and sugar, fold in the "
                  "flour and bake it for an hour.")
PROBE_UNRELATED = "The quarterly tax return is due at the end of April; keep every receipt."
PROBE_MARGIN = 0.05


@dataclass(frozen=True)
class HubFile:
    name: str  # in the model folder: model.onnx or tokenizer.json
    path: str  # in the hub repository
    approx_bytes: int  # as the hub lists it; the download must be within 5% of it


@dataclass(frozen=True)
class CatalogModel:
    name: str
    purpose: str
    languages: str
    dim: int
    window: int  # the most tokens the model reads
    max_tokens: int  # what notewell writes in [model]: the chunker cuts passages for it
    pooling: str
    query_prefix: str = ""
    passage_prefix: str = ""
    repo: str = ""  # "" for the shipped model
    revision: str = ""
    files: tuple[HubFile, ...] = ()
    figures: str = ""  # published retrieval figures and their source

    @property
    def shipped(self) -> bool:
        return not self.repo

    @property
    def download_bytes(self) -> int:
        return sum(f.approx_bytes for f in self.files)

    def url(self, f: HubFile, base: str | None = None) -> str:
        base = (base or os.environ.get(HUB_ENV) or HUB).rstrip("/")
        return f"{base}/{self.repo}/resolve/{self.revision}/{f.path}"

    def model_config(self, folder: str | None) -> ModelConfig | None:
        """``[model]`` for this model in ``folder`` (None: the shipped model, no table)."""
        if self.shipped:
            return None
        assert folder is not None
        return ModelConfig(path=folder, pooling=self.pooling, max_tokens=self.max_tokens,
                           query_prefix=self.query_prefix or None,
                           passage_prefix=self.passage_prefix or None)


# Sizes, dimensions, windows, pooling and prefixes as the repositories and model cards
# publish them; the revisions are the repositories' commits, so the files never change
# under notewell. Xenova's exports are optimum's ONNX export with a dynamically quantized
# int8 copy, `onnx/model_quantized.onnx`, beside the tokenizer.json of the model.
CATALOG: dict[str, CatalogModel] = {m.name: m for m in (
    CatalogModel(
        name=MODEL_ID, languages="English", dim=DIM, window=MAX_TOKENS,
        max_tokens=MAX_TOKENS, pooling="mean",
        purpose="the shipped model: small and fast, no download; English notes",
        files=(HubFile(MODEL_FILE, "", 22_928_619), HubFile(TOKENIZER_FILE, "", 466_247)),
        figures="MTEB retrieval (15 BEIR sets, nDCG@10) 41.95 (MTEB leaderboard, as "
                "tabulated in Snowflake's arctic-embed model cards)"),
    CatalogModel(
        name="bge-small-en-v1.5", languages="English", dim=384, window=512,
        max_tokens=MAX_TOKENS, pooling="cls",
        query_prefix="Represent this sentence for searching relevant passages: ",
        purpose="stronger English retrieval than the shipped model; 12 layers to its 6, "
                "so about twice the work per passage",
        repo="Xenova/bge-small-en-v1.5", revision="ea104dacec62c0de699686887e3f920caeb4f3e3",
        files=(HubFile(MODEL_FILE, "onnx/model_quantized.onnx", 34_000_000),
               HubFile(TOKENIZER_FILE, "tokenizer.json", 711_000)),
        figures="MTEB retrieval (15 BEIR sets, nDCG@10) 51.68, MTEB average (56 sets) "
                "62.17 (BAAI/bge-small-en-v1.5 model card)"),
    CatalogModel(
        name="multilingual-e5-small", languages="about 100 languages", dim=384, window=512,
        max_tokens=MAX_TOKENS, pooling="mean", query_prefix="query: ",
        passage_prefix="passage: ",
        purpose="notes in other languages, or in several; 12 layers to the shipped "
                "model's 6, so about twice the work per passage",
        repo="Xenova/multilingual-e5-small",
        revision="97cb8f96eaed1a1f0dac821239943e854fce9c36",
        files=(HubFile(MODEL_FILE, "onnx/model_quantized.onnx", 118_000_000),
               HubFile(TOKENIZER_FILE, "tokenizer.json", 17_100_000)),
        figures="Mr. TyDi (11 languages) MRR@10 64.4, BM25 33.3 "
                "(intfloat/multilingual-e5-small model card)"),
)}
SHIPPED = MODEL_ID


def entry(name: str, catalog: Mapping[str, CatalogModel] = CATALOG) -> CatalogModel:
    found = catalog.get(name)
    if found is None:
        raise ModelError(f"no model named {name!r} in the catalog; choose one of "
                         f"{', '.join(catalog)} (`notewell model list`)")
    return found


def folder_of(name: str, directory: str | None = None) -> str:
    return os.path.join(directory or paths.model_dir(), name)


def read_manifest(folder: str) -> dict:
    try:
        with open(os.path.join(folder, MANIFEST), encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def installed(name: str, directory: str | None = None,
              catalog: Mapping[str, CatalogModel] = CATALOG) -> str | None:
    """The folder of catalog model ``name`` when it was downloaded whole and passed the
    functional check (its files still of the sizes received); None otherwise, and for the
    shipped model, which has no folder (``embedder`` loads either)."""
    model = catalog.get(name)
    if model is None or model.shipped:
        return None
    folder = folder_of(name, directory)
    manifest = read_manifest(folder)
    if not manifest.get("complete") or manifest.get("revision") != model.revision:
        return None
    for f in model.files:
        got = (manifest.get("files") or {}).get(f.name) or {}
        size = _size(os.path.join(folder, f.name))
        if size is None or size != got.get("bytes"):
            return None
    return folder


def changed_files(folder: str) -> list[str]:
    """Files of a downloaded model whose sha256 is no longer the one recorded when it
    arrived (hashes are remembered by size and modification time: cheap after once)."""
    manifest = read_manifest(folder)
    changed = []
    for name, got in sorted((manifest.get("files") or {}).items()):
        path = os.path.join(folder, name)
        try:
            if cached_sha256(path) != got.get("sha256"):
                changed.append(name)
        except OSError:
            changed.append(name)
    return changed


def in_use(model: ModelConfig | None, directory: str | None = None,
           catalog: Mapping[str, CatalogModel] = CATALOG) -> str | None:
    """The catalog name of the model ``[model]`` names, by its folder (settings changed by
    hand included); None for a model of the user's own."""
    for m in catalog.values():
        if (model is None) if m.shipped else (
                model is not None and model.path == folder_of(m.name, directory)):
            return m.name
    return None


def model_config(name: str, directory: str | None = None,
                 catalog: Mapping[str, CatalogModel] = CATALOG) -> ModelConfig | None:
    """``[model]`` for an installed catalog model (None for the shipped one); ``ModelError``
    when it is not downloaded."""
    model = entry(name, catalog)
    if model.shipped:
        return None
    folder = installed(name, directory, catalog)
    if folder is None:
        raise ModelError(f"{name} is not downloaded: `notewell model use {name}` downloads "
                         "it (and switches to it)")
    return model.model_config(folder)


def embedder(name: str, directory: str | None = None,
             catalog: Mapping[str, CatalogModel] = CATALOG) -> Embedder:
    """The embedder of a catalog model: the shipped one, or an installed one."""
    table = model_config(name, directory, catalog)
    if table is None:
        return default_embedder()
    return custom_embedder(open_folder(table.path, **table.settings()))


def check(model: CatalogModel, embedder: Embedder) -> tuple[float, float]:
    """The functional check: ``embedder`` gives ``model.dim`` dimensions and ranks the
    probe's relevant passage above its unrelated one; the two cosines, or ``ModelError``."""
    if embedder.dim != model.dim:
        raise ModelError(f"{model.name} gives vectors of {embedder.dim} dimensions where its "
                         f"catalog entry says {model.dim}: not the model notewell knows")
    query = embed_queries(embedder, [PROBE_QUERY])[0]
    passages = embedder.embed_batch([PROBE_RELEVANT, PROBE_UNRELATED])
    relevant, unrelated = (float(x) for x in passages @ query)
    if not relevant >= unrelated + PROBE_MARGIN:
        raise ModelError(f"{model.name} failed the functional check: a query about banana "
                         f"bread scored {relevant:.3f} against a passage about it and "
                         f"{unrelated:.3f} against one about taxes; the files are not a "
                         "working model")
    return relevant, unrelated


def install(model: CatalogModel, directory: str | None = None, base_url: str | None = None,
            progress: download.Progress | None = None) -> str | None:
    """Download ``model`` into its folder (resuming an interrupted try) unless it is
    installed, check it, and record it; the folder (None for the shipped model). On a
    refused file or a failed check the files are deleted and ``ModelError`` says why; an
    interrupted download keeps its ``.part`` files for the next try."""
    found = installed(model.name, directory, {model.name: model})
    if found is not None or model.shipped:
        return found
    folder = folder_of(model.name, directory)  # made with the first byte received
    manifest = read_manifest(folder)
    if manifest.get("revision") != model.revision:
        manifest = {}
    files = manifest.get("files") or {}
    try:
        for f in model.files:
            path = os.path.join(folder, f.name)
            done = files.get(f.name)
            if done and done.get("url") == model.url(f, base_url) and _size(path) == done.get(
                    "bytes"):
                continue  # arrived whole in an earlier, interrupted try
            got = download.fetch(model.url(f, base_url), path, f.approx_bytes,
                                 progress=progress, label=f"{model.name}: {f.name}")
            files[f.name] = {"path": f.path, "url": model.url(f, base_url),
                             "bytes": got.bytes, "sha256": got.sha256,
                             "hub_sha256": got.hub_sha256}
            _write_manifest(folder, model, files, complete=False)
    except BaseException:
        _remove_if_empty(folder)
        raise
    table = model.model_config(folder)
    assert table is not None
    try:
        loaded = custom_embedder(open_folder(table.path, **table.settings()))
        scores = check(model, loaded)
    except ModelError as e:
        _remove_files(folder, model)
        raise ModelError(f"{e} (downloaded from {model.repo} at {model.revision[:12]}; "
                         "the files were deleted and nothing was switched)") from None
    _write_manifest(folder, model, files, complete=True,
                    check={"dim": loaded.dim, "relevant": round(scores[0], 4),
                           "unrelated": round(scores[1], 4)})
    return folder


def _write_manifest(folder: str, model: CatalogModel, files: dict, complete: bool,
                    check: dict | None = None) -> None:
    data = {"name": model.name, "repo": model.repo, "revision": model.revision,
            "complete": complete, "files": files,
            "downloaded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if check is not None:
        data["check"] = check
    paths.write_atomic(os.path.join(folder, MANIFEST),
                       (json.dumps(data, indent=1) + "\n").encode())


def _size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def _remove_files(folder: str, model: CatalogModel) -> None:
    for name in [f.name for f in model.files] + [MANIFEST]:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(folder, name))
    _remove_if_empty(folder)


def _remove_if_empty(folder: str) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(folder)  # only when empty: a .part file kept for resuming stays
