"""``notewell model list`` and ``notewell model use``: the catalog, and switching to one of
its models in one command.

``use`` does the whole switch, in this order, and changes nothing until the last steps:
download the model's files (only when the user runs it; resumable; size and hash
checked: ``model.download``), load it and run the functional check (``model.catalog``),
then, holding the index's writer lock (``index.writer``), build a new index beside the
live one with the new model (``ingest.rebuild``: passages whose text the index already
holds are not cut again, and the old model's vectors are kept, so switching back embeds
nothing it had), write ``[model]`` to config.toml just before the build is published,
and finally restart the running daemon in its process so it loads the new model
(``ops.running.restart``). Meanwhile the daemon keeps answering from the old index, and
its own syncs wait for the lock. A failure or Ctrl-C before the publish leaves config,
index and daemon as they were (a partial download is kept for the next try).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping

from notewell import config as config_file
from notewell.engine import chunker_for, embedder_for, rebuild
from notewell.index import writer
from notewell.index.schema import describe
from notewell.index.store import current_path
from notewell.ingest.sync import ProgressBars
from notewell.model import catalog
from notewell.model.catalog import CATALOG, CatalogModel
from notewell.model.download import Progress
from notewell.model.embedding import Embedder
from notewell.model.files import ModelError
from notewell.ops import running
from notewell.sources import open_source
from notewell.wire import paths

Catalog = Mapping[str, CatalogModel]


def list_models(cat: Catalog = CATALOG, directory: str | None = None) -> list[dict]:
    """Every catalog model: what it is for, its size, dimension, window and languages, its
    published figures, whether it is downloaded (with the sha256 of what arrived) and
    whether config.toml names it now."""
    try:
        current = config_file.load().model
    except config_file.ConfigError:
        current = None
    using = catalog.in_use(current, directory, cat)
    out = []
    for m in cat.values():
        folder = None if m.shipped else catalog.installed(m.name, directory, cat)
        files = catalog.read_manifest(folder).get("files", {}) if folder else {}
        out.append({
            "name": m.name, "purpose": m.purpose, "languages": m.languages, "dim": m.dim,
            "window": m.window, "max_tokens": m.max_tokens, "pooling": m.pooling,
            "query_prefix": m.query_prefix, "passage_prefix": m.passage_prefix,
            "bytes": m.download_bytes, "shipped": m.shipped, "figures": m.figures,
            "source": None if m.shipped else f"{m.repo}@{m.revision}",
            "installed": m.shipped or folder is not None, "folder": folder,
            "sha256": {name: f.get("sha256") for name, f in files.items()},
            "in_use": m.name == using,
        })
    return out


def get(name: str, *, cat: Catalog = CATALOG, directory: str | None = None,
        base_url: str | None = None, download_progress: Progress | None = None) -> str | None:
    """Download catalog model ``name`` and check it (``catalog.install``) without switching
    to it, for ``notewell eval --self --models NAME``; its folder (None: the shipped one)."""
    return catalog.install(catalog.entry(name, cat), directory, base_url, download_progress)


def use(name: str, *, cat: Catalog = CATALOG, directory: str | None = None,
        base_url: str | None = None, download_progress: Progress | None = None,
        progress: bool | ProgressBars = False,
        make_embedder: Callable[[config_file.Config], Embedder] = embedder_for,
        on_wait: Callable[[str], None] | None = None,
        restart: Callable[[], dict | None] = running.restart) -> dict:
    """Switch notewell to catalog model ``name`` (see the module's docstring); what was
    done: ``name``, ``folder``, ``fingerprint``, ``already`` (nothing to do), the rebuild's
    ``reports``, the ``daemon``'s state after its restart (None: none was running) and the
    folder of a model of the user's own that ``[model]`` named before (``replaced``).
    Raises ``ModelError`` (``download.DownloadError`` for the network and the files) and
    ``ConfigError``; nothing is switched then."""
    model = catalog.entry(name, cat)
    cfg = config_file.load()
    folder = catalog.install(model, directory, base_url, download_progress)
    new = dataclasses.replace(cfg, model=model.model_config(folder))
    if folder is not None and catalog.changed_files(folder):
        raise ModelError(f"the files in {folder} changed since they were downloaded: delete "
                         f"the folder and run `notewell model use {name}` again")
    embedder = make_embedder(new)
    catalog.check(model, embedder)
    index_dir = paths.index_dir()
    own = cfg.model is not None and catalog.in_use(cfg.model, directory, cat) is None
    report = {"name": name, "folder": folder, "fingerprint": embedder.fingerprint(),
              "already": False, "reports": [], "daemon": None,
              "replaced": cfg.model.path if own and cfg.model else None}
    if new.model == cfg.model and _built_with(index_dir) == embedder.fingerprint():
        return {**report, "already": True}
    with writer.hold(index_dir, f"notewell model use {name}", on_wait=on_wait):
        final, reports = rebuild(
            [open_source(s) for s in cfg.sources], embedder, chunker_for(embedder),
            index_dir, progress, keep_if_failed={s.name for s in cfg.sources},
            before_publish=lambda: config_file.save_model(new.model, cfg.path))
    report["reports"] = [r.to_dict() for r in reports]
    if final is None:
        failed = "; ".join(f"{r.source}: {r.error}" for r in reports if r.error)
        raise ModelError(f"not switched to {name}: {failed or 'the rebuild stopped'}; fix "
                         "the source (or remove it from config.toml) and run the command "
                         "again: config.toml and the index are as they were")
    report["daemon"] = restart()
    return report


def _built_with(index_dir: str) -> str | None:
    """The model fingerprint the live index was built with (None: no index yet)."""
    path = current_path(index_dir)
    if not os.path.exists(path):
        return None
    try:
        return describe(path).meta.get("embedder")
    except Exception:  # a damaged index: the rebuild replaces it
        return None
