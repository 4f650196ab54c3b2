"""The user's configuration: ``$NOTEWELL_HOME/config.toml``.

Sources are ``[[sources]]`` tables with ``name``, ``type``, ``path`` and ``exclude``; the
other keys a source type reads (``SOURCE_OPTIONS``: Bear's ``include_archived``, a
folder's ``pdfs``) are kept in ``options``. An optional ``[model]`` table names a model
folder of the user's own (``ModelConfig``; checked and loaded by ``model.custom``). A
missing file means no sources, not an error. A table or key notewell does not know is
an error naming the nearest known one (a misspelt ``exlude`` would index what it meant
to keep out); a relative ``path`` is read from the config file's folder; an ``exclude``
that leaves no note is a warning (``Config.warnings``, logged when the file is loaded).
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
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

log = logging.getLogger(__name__)

SOURCE_TYPES = ("markdown", "obsidian", "bear")
SOURCE_KEYS = ("name", "type", "path", "exclude")
_FOLDER_OPTIONS = ("url_template", "new_note_url", "pdfs", "pdf_max_mb")
# The keys each type reads besides ``SOURCE_KEYS``.
SOURCE_OPTIONS = {"markdown": _FOLDER_OPTIONS, "obsidian": _FOLDER_OPTIONS,
                  "bear": ("include_archived",)}
TOP_KEYS = ("sources", "debug_log", "model")


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
    # What is allowed but probably not meant (an exclude that leaves no note).
    warnings: tuple[str, ...] = ()


def load(path: str | None = None) -> Config:
    path = path or paths.config_path()
    if not os.path.exists(path):
        return Config(path=path)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from None
    cfg = parse(data, path)
    for warning in cfg.warnings:
        log.warning("%s", warning)
    return cfg


_TOP_SHOWN = {"sources": "[[sources]]", "model": "[model]", "debug_log": "'debug_log'"}


def _unknown(shown: str, known: dict[str, str], where: str) -> str:
    """The message for a key or table ``shown`` (as written) not among ``known`` (name ->
    as written), naming the nearest known one."""
    name = shown.strip("[]'")
    near = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    hint = (f"did you mean {known[near[0]]}?" if near
            else f"known: {', '.join(known.values())}")
    what = "key" if shown.startswith("'") else "table"
    return f"unknown {what} {shown} {where}: {hint}"


def _check_top(data: dict, path: str | None) -> None:
    where = f"in {path or 'config'}"
    for key, value in data.items():
        if key in TOP_KEYS:
            continue
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            shown = f"[[{key}]]"
        else:
            shown = f"[{key}]" if isinstance(value, dict) else f"'{key}'"
        raise ConfigError(_unknown(shown, _TOP_SHOWN, where))
    if not isinstance(data.get("sources", []), list):
        raise ConfigError(f"'sources' {where} must be [[sources]] tables")


def _source_path(value: object, config_path: str | None) -> str:
    """A source's folder as an absolute path; a relative one is read from the config
    file's folder, as the file is (not from wherever the command was run)."""
    path = os.path.expanduser(str(value))
    if not os.path.isabs(path) and config_path:
        path = os.path.join(os.path.dirname(os.path.abspath(config_path)), path)
    return os.path.abspath(path)


def parse(data: dict, path: str | None = None) -> Config:
    _check_top(data, path)
    sources = []
    warnings: list[str] = []
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
        named = f"in [[sources]] {name!r} ({path or 'config'})"
        known = SOURCE_KEYS + SOURCE_OPTIONS[kind]
        for key in raw:
            if key in known:
                continue
            others = [t for t in SOURCE_TYPES if key in SOURCE_OPTIONS[t]]
            if others:
                raise ConfigError(f"'{key}' {named} does not apply to a {kind} source (only "
                                  f"to {' and '.join(others)} sources): remove it")
            raise ConfigError(_unknown(f"'{key}'", {k: f"'{k}'" for k in known}, named))
        src_path = raw.get("path")
        if src_path is not None:
            src_path = _source_path(src_path, path)
        elif kind != "bear":
            raise ConfigError(f"{where}: a {kind} source needs 'path'")
        exclude = raw.get("exclude", [])
        if isinstance(exclude, str):
            exclude = [exclude]
        if not all(isinstance(g, str) for g in exclude):
            raise ConfigError(f"{where}: 'exclude' must be a list of glob strings")
        options = {k: v for k, v in raw.items() if k not in SOURCE_KEYS}
        _check_pdf_options(where, kind, options)
        everything = [g for g in exclude if _excludes_every_note(g)]
        if everything and kind != "bear":
            warnings.append(f"exclude {everything[0]!r} {named} leaves out every note: "
                            "nothing of this source is indexed; name the folders to leave "
                            "out instead (\"private/**\")")
        sources.append(SourceConfig(name, kind, src_path, tuple(exclude), options))
    return Config(tuple(sources), bool(data.get("debug_log", False)), path,
                  parse_model(data.get("model"), path), tuple(warnings))


def glob_to_regex(glob: str) -> re.Pattern[str]:
    """Gitignore-like globs on '/'-separated relative paths: ``*`` stays within a folder,
    ``**`` crosses folders, a trailing ``/`` or ``/**`` means everything below."""
    g = glob.strip().lstrip("/")
    if g.endswith("/"):
        g += "**"
    out = "".join(_GLOB.get(part) or re.escape(part)
                  for part in re.findall(r"\*\*/|\*\*|\*|\?|.", g, re.S))
    # A pattern without '/' matches at any depth, as in .gitignore.
    prefix = "" if "/" in glob.strip().rstrip("/") else "(?:.*/)?"
    return re.compile(prefix + out + "$")


_GLOB = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}  # the rest, itself


def _excludes_every_note(glob: str) -> bool:
    """Whether an exclude pattern leaves out a note at the top and one in any folder
    (``**``, ``*``, ``*.md``), or every folder with the top's notes."""
    rx = glob_to_regex(glob)
    top = bool(rx.match("note.md"))
    return top and (bool(rx.match("folder/note.md")) or bool(rx.match("folder/")))


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
    sources = [{"name": s.name, "type": s.type, **({"path": s.path} if s.path else {}),
                "exclude": list(s.exclude), **s.options} for s in config.sources]
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
