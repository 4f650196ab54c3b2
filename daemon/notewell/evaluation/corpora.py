"""The corpora ``notewell eval`` ranks: a Markdown folder or a BEIR dataset, indexed
through the normal sync path into throw-away indexes under ``$NOTEWELL_HOME/eval/<key>/``
that are kept and reused.

Vectors are content-addressed, so a second run embeds nothing, and a chunker change
re-chunks without re-embedding passages whose text did not change. A BEIR corpus becomes
notes (title plus text) through ``BeirSource``, an in-memory implementation of the
``Source`` protocol (``known_items.NotesSource``, read on first use). May import
``evaluation.metrics`` (its errors and file reading), ``evaluation.known_items``,
``config``, ``notes``, ``index``, ``ingest``, ``model``, ``sources``, ``wire.paths`` and
``engine`` (a rebuild beside).
"""

from __future__ import annotations

import hashlib
import os

from notewell.config import SourceConfig
from notewell.evaluation.known_items import NotesSource
from notewell.evaluation.metrics import EvalError, jsonl
from notewell.index import store
from notewell.index.database import Index
from notewell.index.schema import BuildSettings, IndexMismatch
from notewell.ingest.chunking import ChunkSettings
from notewell.ingest.sync import Syncer
from notewell.model.embedding import Embedder
from notewell.model.files import sha256_file
from notewell.notes import Note
from notewell.sources import Source
from notewell.wire import paths


class BeirSource(NotesSource):
    """A BEIR ``corpus.jsonl`` as a note source: one note per document, titled with the
    document's title, ``note_id`` ``<name>:<doc id>``. Read once, on first use, and held
    in memory."""

    kind = "beir"

    def __init__(self, directory: str, name: str = "beir") -> None:
        self.config = SourceConfig(name, "beir", os.path.abspath(directory))
        self.corpus_path = os.path.join(directory, "corpus.jsonl")
        self._docs: dict[str, Note] | None = None

    @property
    def notes(self) -> dict[str, Note]:
        if self._docs is None:
            docs = {}
            for row in jsonl(self.corpus_path):
                note_id = f"{self.name}:{row['_id']}"
                title, text = str(row.get("title") or ""), str(row.get("text") or "")
                fingerprint = hashlib.sha256(f"{title}\x00{text}".encode()).hexdigest()[:16]
                docs[note_id] = Note(note_id=note_id, source=self.name, kind=self.kind,
                                     title=title or row["_id"], text=text,
                                     url=f"beir:{row['_id']}", fingerprint=fingerprint)
            self._docs = docs
        return self._docs


def eval_dir(key: str) -> str:
    return os.path.join(paths.home(), "eval", key)


def eval_index(source: Source, embedder: Embedder, key: str,
               chunker: ChunkSettings | None = None, progress: bool = False) -> Index:
    """The throw-away index for ``source`` under ``$NOTEWELL_HOME/eval/<key>/``, brought up
    to date. Reused across runs; rebuilt beside (keeping its vectors) after a model or
    chunker change."""
    from notewell.engine import rebuild

    chunker = chunker or ChunkSettings.for_tokens(getattr(embedder, "max_tokens", 256))
    directory = paths.ensure_private_dir(eval_dir(key))
    settings = BuildSettings(embedder.fingerprint(), embedder.dim, chunker.fingerprint())
    try:
        index = store.open_current(settings, directory)
    except IndexMismatch:
        final, _ = rebuild([source], embedder, chunker, directory, progress=progress)
        store.remove_old(directory, keep=final)
        index = Index(final, settings)
    else:
        Syncer(index, embedder, chunker).sync(source, progress=progress)
    # As a warm daemon has them, so every query is ranked the same way.
    index.warm_vectors(wait=True)
    index.warm_keywords(wait=True)
    return index


def folder_source(directory: str, name: str = "notes",
                  exclude: tuple[str, ...] = ("private/**",)) -> Source:
    from notewell.sources.markdown import MarkdownSource

    if not os.path.isdir(directory):
        raise EvalError(f"{directory} is not a folder of Markdown notes")
    return MarkdownSource(SourceConfig(name, "markdown", os.path.abspath(directory), exclude))


def folder_index(notes_dir: str, embedder: Embedder, name: str = "notes",
                 progress: bool = False) -> Index:
    """The reused throw-away index of a Markdown folder (``private/**`` excluded)."""
    key = f"{name}-" + hashlib.sha256(os.path.abspath(notes_dir).encode()).hexdigest()[:16]
    return eval_index(folder_source(notes_dir, name), embedder, key, progress=progress)


def beir_index(directory: str, embedder: Embedder, progress: bool = False) -> Index:
    name = os.path.basename(os.path.normpath(directory)) or "beir"
    corpus = os.path.join(directory, "corpus.jsonl")
    if not os.path.exists(corpus):
        raise EvalError(f"{corpus} is missing: --beir wants a BEIR dataset directory "
                        "(corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    key = f"{name}-{sha256_file(corpus)[:16]}"
    return eval_index(BeirSource(directory, name), embedder, key, progress=progress)
