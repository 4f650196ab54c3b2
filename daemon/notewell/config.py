"""The user's configuration: ``$NOTEWELL_HOME/config.toml``.

Sources are ``[[sources]]`` tables with ``name``, ``type``, ``path`` and ``exclude``; any
other key is kept in ``options`` for the source type to read (e.g. Bear's
``include_archived``). An optional ``[model]`` table names a model folder of the user's
own (``ModelConfig``; checked and loaded by ``model.custom``). A missing file means no
sources, not an error.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from dataclasses import dataclass, field

import tomli_w

from notewell.wire import paths

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SOURCE_TYPES = ("markdown", "obsidian", "bear")


class ConfigError(Exception):
    """The configuration cannot be used as written; the message says what to change."""


@dataclass(frozen=True)
class SourceConfig:
    name: str
    type: str
    path: str | None = None
    exclude: tuple[str, ...] = ()
    options: dict = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class ModelConfig:
    """``[model]``: a folder with ``model.onnx`` and ``tokenizer.json``; every other
    setting None means the model folder's own or the usual default (``model.custom``)."""

    path: str
    pooling: str | None = None
    normalize: bool | None = None
    max_tokens: int | None = None
    query_prefix: str | None = None
    passage_prefix: str | None = None

    def settings(self) -> dict:
        """The settings as ``model.custom.open_folder`` takes them."""
        return {k: getattr(self, k) for k in MODEL_KEYS if k != "path"}


MODEL_KEYS = ("path", "pooling", "normalize", "max_tokens", "query_prefix", "passage_prefix")


@dataclass(frozen=True)
class Config:
    sources: tuple[SourceConfig, ...] = ()
    debug_log: bool = False
    path: str | None = None
    model: ModelConfig | None = None


def load(path: str | None = None) -> Config:
    path = path or paths.config_path()
    if not os.path.exists(path):
        return Config(path=path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from None
    return parse(data, path)


def parse(data: dict, path: str | None = None) -> Config:
    sources = []
    seen: set[str] = set()
    for i, raw in enumerate(data.get("sources", [])):
        where = f"[[sources]] #{i + 1} in {path or 'config'}"
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} must be a table")
        name, kind = raw.get("name"), raw.get("type")
        if not isinstance(name, str) or not name or ":" in name or " " in name:
            raise ConfigError(f"{where}: 'name' must be a short word without spaces or ':'")
        if name in seen:
            raise ConfigError(f"{where}: the name {name!r} is used twice")
        seen.add(name)
        if kind not in SOURCE_TYPES:
            raise ConfigError(f"{where}: 'type' must be one of {', '.join(SOURCE_TYPES)}")
        src_path = raw.get("path")
        if src_path is not None:
            src_path = os.path.abspath(os.path.expanduser(str(src_path)))
        elif kind != "bear":
            raise ConfigError(f"{where}: a {kind} source needs 'path'")
        exclude = raw.get("exclude", [])
        if isinstance(exclude, str):
            exclude = [exclude]
        if not all(isinstance(g, str) for g in exclude):
            raise ConfigError(f"{where}: 'exclude' must be a list of glob strings")
        options = {k: v for k, v in raw.items() if k not in ("name", "type", "path", "exclude")}
        _check_pdf_options(where, kind, options)
        sources.append(SourceConfig(name, kind, src_path, tuple(exclude), options))
    return Config(tuple(sources), bool(data.get("debug_log", False)), path,
                  parse_model(data.get("model"), path))


def parse_model(raw, path: str | None = None) -> ModelConfig | None:
    """The ``[model]`` table, its types checked (the folder itself is checked when the
    model loads, and by ``notewell doctor``)."""
    if raw is None:
        return None
    where = f"[model] in {path or 'config'}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a table")
    unknown = sorted(set(raw) - set(MODEL_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: "
                          f"{', '.join(MODEL_KEYS)}")
    folder = raw.get("path")
    if not isinstance(folder, str) or not folder:
        raise ConfigError(f"{where}: 'path' must name the folder holding model.onnx and "
                          "tokenizer.json")
    kinds = {"pooling": str, "normalize": bool, "max_tokens": int, "query_prefix": str,
             "passage_prefix": str}
    for key, kind in kinds.items():
        value = raw.get(key)
        if value is not None and (not isinstance(value, kind)
                                  or (kind is int and isinstance(value, bool))):
            raise ConfigError(f"{where}: '{key}' must be a {kind.__name__}")
    if raw.get("pooling") not in (None, "mean", "cls"):
        raise ConfigError(f"{where}: 'pooling' must be \"mean\" or \"cls\"")
    return ModelConfig(os.path.abspath(os.path.expanduser(folder)),
                       **{k: raw.get(k) for k in kinds})


PDF_MODES = ("linked", "all", "none")


def _check_pdf_options(where: str, kind: str, options: dict) -> None:
    """``pdfs`` and ``pdf_max_mb`` (folders and vaults): a wrong value is an error here,
    not a source that fails later."""
    if "pdfs" in options and (kind == "bear" or options["pdfs"] not in PDF_MODES):
        raise ConfigError(f"{where}: 'pdfs' must be one of {', '.join(PDF_MODES)} "
                          "(markdown and obsidian sources only)")
    if "pdf_max_mb" in options:
        value = options["pdf_max_mb"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ConfigError(f"{where}: 'pdf_max_mb' must be a number of megabytes above 0")


def dump(config: Config) -> str:
    """TOML text for a config; only the shapes notewell itself writes."""
    data: dict = {}
    if config.debug_log:
        data["debug_log"] = True
    if config.model is not None:
        model = {k: getattr(config.model, k) for k in MODEL_KEYS}
        data["model"] = {k: v for k, v in model.items() if v is not None}
    sources = []
    for s in config.sources:
        table: dict = {"name": s.name, "type": s.type}
        if s.path:
            table["path"] = s.path
        table["exclude"] = list(s.exclude)
        table.update(s.options)
        sources.append(table)
    if sources:
        data["sources"] = sources
    return tomli_w.dumps(data)


def save(config: Config, path: str | None = None) -> str:
    path = path or paths.config_path()
    paths.write_atomic(path, dump(config).encode("utf-8"))
    return path



_HEADER = re.compile(r"^\s*\[")  # a table's or an array of tables' header line
_MODEL_HEADER = re.compile(r"^\s*\[\s*model\s*\]\s*(#.*)?$")


def save_model(model: ModelConfig | None, path: str | None = None) -> str:
    """Set ``[model]`` in config.toml (None: remove it), keeping the rest of the file as
    the user wrote it, comments included; the whole file is written from the parsed
    config (``save``) only when the table is in a form this cannot edit in place (dotted
    keys, an inline table). The path written."""
    path = path or paths.config_path()
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        text = ""
    old = parse(tomllib.loads(text), path) if text else Config(path=path)
    want = dataclasses.replace(old, model=model)
    table = "" if model is None else tomli_w.dumps({"model": {
        k: getattr(model, k) for k in MODEL_KEYS if getattr(model, k) is not None}})
    kept: list[str] = []
    pending: list[str] = []  # comments at the end of the old table: the next one's
    inside, at = False, None
    for line in text.splitlines(keepends=True):
        if _HEADER.match(line):
            if inside:
                kept += pending
            inside = bool(_MODEL_HEADER.match(line))
            if inside and at is None:
                at = len(kept)  # the new table goes where the old one was
            pending = []
        if not inside:
            kept.append(line)
        elif not line.strip() or line.lstrip().startswith("#"):
            pending.append(line)
        else:
            pending = []
    head, tail = "".join(kept[:at]), "".join(kept[at:]) if at is not None else ""
    if table:
        edited = (head.rstrip("\n") + "\n\n" if head.strip() else "") + table + tail
    else:
        edited = (head.rstrip("\n") + "\n" if head.strip() else "") + tail
    try:
        same = dump(parse(tomllib.loads(edited), path)) == dump(want)
    except (tomllib.TOMLDecodeError, ConfigError):
        same = False
    if not same:
        return save(want, path)
    paths.write_atomic(path, edited.encode("utf-8"))
    return path
