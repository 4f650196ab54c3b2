"""Note sources: where notes come from (Markdown folders, Obsidian vaults, Bear).

Owns ``base`` (the ``Source`` protocol and its errors), ``markdown`` (folders of Markdown
files and the PDFs they link, and the Markdown reading the others share), ``obsidian``
(vaults), ``bear`` (Bear's database, opened read-only, with the text Bear read from
attachments), ``pdf`` (PDF text, page by page, each file version read once) and
``folder`` (listing a folder tree, with what could not be listed and what a cloud drive
keeps online only).
``open_source(config)`` returns the ``Source`` for one ``[[sources]]`` table. Every source
answers the same questions: which notes exist and how they look cheaply (``scan``), what
one note says (``load``), the link that opens a passage (``passage_url``), and the link
that asks the source's app to create a note (``new_note_url``). May import ``config``,
``notes`` and ``wire``.
"""

from __future__ import annotations

from notewell.config import SourceConfig
from notewell.sources.base import Listing, Source, SourceError, SourceWarning

__all__ = ["Listing", "Source", "SourceError", "SourceWarning", "open_source"]


def open_source(cfg: SourceConfig) -> Source:
    if cfg.type == "markdown":
        from notewell.sources.markdown import MarkdownSource

        return MarkdownSource(cfg)
    if cfg.type == "obsidian":
        from notewell.sources.obsidian import ObsidianSource

        return ObsidianSource(cfg)
    if cfg.type == "bear":
        from notewell.sources.bear import BearSource

        return BearSource(cfg)
    raise SourceError(f"unknown source type {cfg.type!r}")
