"""Obsidian vaults: a Markdown folder with ``.obsidian/``, read the way Obsidian reads it.

Reuses ``MarkdownSource`` for walking and parsing, and adds what a vault means: skip
``.obsidian/`` and ``.trash/``, honour the vault's own "Excluded files"
(``userIgnoreFilters`` in ``.obsidian/app.json``, re-read when it changes), title a note
by its ``title`` frontmatter or its file name (what Obsidian shows), and open passages with
``obsidian://open?vault=NAME&file=PATH%23Heading``. ``list_vaults`` reads Obsidian's own
registry of vaults (``obsidian.json``) for ``notewell vaults``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import urllib.parse

from notewell.config import SourceConfig
from notewell.notes import Note
from notewell.sources.base import Listing, SourceError
from notewell.sources.frontmatter import meta_title
from notewell.sources.markdown import MarkdownSource, _stem

log = logging.getLogger(__name__)


def registry_paths() -> list[str]:
    """Where Obsidian keeps ``obsidian.json`` (its list of vaults) on this platform."""
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        return [os.path.join(home, "Library", "Application Support", "obsidian",
                             "obsidian.json")]
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return [os.path.join(config, "obsidian", "obsidian.json"),
            os.path.join(home, ".var", "app", "md.obsidian.Obsidian", "config", "obsidian",
                         "obsidian.json")]


def list_vaults(registry: str | None = None) -> list[dict]:
    """The vaults Obsidian knows: ``name`` (the folder name, which is what Obsidian URIs
    use), ``path``, ``id``, ``exists`` and ``open``. Empty when Obsidian has no registry."""
    candidates = [registry] if registry else registry_paths()
    for path in candidates:
        if not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise SourceError(f"cannot read Obsidian's vault list {path}: {e}") from None
        vaults = data.get("vaults") if isinstance(data, dict) else None
        out = []
        for vid, info in (vaults or {}).items():
            if not isinstance(info, dict) or not isinstance(info.get("path"), str):
                continue
            vpath = info["path"]
            out.append({"id": vid, "name": os.path.basename(os.path.normpath(vpath)),
                        "path": vpath, "exists": os.path.isdir(vpath),
                        "open": bool(info.get("open"))})
        return sorted(out, key=lambda v: v["name"].lower())
    if registry:
        raise SourceError(f"{registry} does not exist")
    return []


class ObsidianSource(MarkdownSource):
    kind = "obsidian"
    skip_dirs = MarkdownSource.skip_dirs | {".obsidian"}

    def __init__(self, config: SourceConfig) -> None:
        super().__init__(config)
        self.vault = os.path.basename(os.path.normpath(self.root))
        self._filters: tuple[list[str], list[re.Pattern[str]]] = ([], [])
        self._filters_stamp: tuple[int, int] | None = None

    # -- the vault's own exclusions ---------------------------------------------------------

    def app_json(self) -> str:
        return os.path.join(self.root, ".obsidian", "app.json")

    def _refresh_filters(self) -> None:
        try:
            st = os.stat(self.app_json())
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp == self._filters_stamp:
            return
        prefixes: list[str] = []
        patterns: list[re.Pattern[str]] = []
        if stamp is not None:
            try:
                with open(self.app_json(), encoding="utf-8") as f:
                    data = json.load(f)
            except (OSError, ValueError) as e:
                log.warning("%s: %s; the vault's excluded files are not applied", self.app_json(),
                            e)
                data = {}
            for flt in (data.get("userIgnoreFilters") or []) if isinstance(data, dict) else []:
                if not isinstance(flt, str) or not flt.strip():
                    continue
                # Obsidian reads "/.../" as a regular expression, anything else as a prefix.
                if len(flt) > 2 and flt.startswith("/") and flt.endswith("/"):
                    try:
                        patterns.append(re.compile(flt[1:-1]))
                    except re.error:
                        log.warning("%s: ignoring bad filter %r", self.app_json(), flt)
                else:
                    prefixes.append(flt.lstrip("/"))
        # Swapped whole, then stamped: a scan on another thread (the watcher's) sees the
        # old filters or the new ones, and never the new stamp with the old filters.
        self._filters = (prefixes, patterns)
        self._filters_stamp = stamp

    def _excluded(self, rel: str) -> bool:
        if super()._excluded(rel):
            return True
        prefixes, patterns = self._filters
        return any(rel.startswith(p) for p in prefixes) or any(p.search(rel) for p in patterns)

    # -- the Source protocol -------------------------------------------------------------

    def scan(self) -> Listing:
        self._check_root()  # a vault macOS does not let us read is no "missing .obsidian"
        if not os.path.isdir(os.path.join(self.root, ".obsidian")):
            raise SourceError(
                f"{self.root} is not an Obsidian vault (it has no .obsidian folder): use "
                f'type = "markdown" for source {self.name!r} in config.toml, or open it in '
                "Obsidian once")
        self._refresh_filters()
        return super().scan()

    def load(self, note_id: str) -> Note | None:
        if self._filters_stamp is None:
            self._refresh_filters()
        return super().load(note_id)

    def title(self, meta: dict, body: str, rel: str) -> str:
        # Obsidian names a note by its file; a "title" property overrides that here.
        return meta_title(meta) or _stem(rel)

    def _file_param(self, rel: str) -> str:
        return rel[:-3] if rel.lower().endswith(".md") else rel

    def note_url(self, rel: str, path: str) -> str:
        if self.config.options.get("url_template"):
            return super().note_url(rel, path)
        return self._open_url(self._file_param(rel))

    def passage_url(self, note: Note, anchor: str | None, line: int | None = None) -> str:
        if self.config.options.get("url_template"):  # the user's editor, at ``{line}``
            return super().passage_url(note, anchor, line)
        if not anchor:
            return note.url
        rel = self._rel(note.note_id)
        return self._open_url(f"{self._file_param(rel)}#{anchor}")

    def new_note_url(self, title: str, tags: tuple[str, ...] = ()) -> str | None:
        """Obsidian's own ``new`` action in this vault (the query's ``#tags`` as its first
        line); a ``new_note_url`` option overrides it."""
        if self.config.options.get("new_note_url"):
            return super().new_note_url(title, tags)
        name = title.strip().replace("/", "-")
        if not name:
            return None
        url = (f"obsidian://new?vault={urllib.parse.quote(self.vault, safe='')}"
               f"&name={urllib.parse.quote(name, safe='')}")
        if tags:
            url += "&content=" + urllib.parse.quote(" ".join("#" + t for t in tags), safe="")
        return url

    def _open_url(self, file: str) -> str:
        return (f"obsidian://open?vault={urllib.parse.quote(self.vault, safe='')}"
                f"&file={urllib.parse.quote(file, safe='')}")
