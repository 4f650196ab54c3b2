"""What the index tests share: build settings of the fake model, a note, storing it as a
sync would (chunked, embedded, written), and an index as an older notewell left it."""

from __future__ import annotations

from notewell.index import schema, sql
from notewell.index.copies import Held
from notewell.index.database import Index
from notewell.index.schema import BuildSettings
from notewell.index.terms import Vocabulary
from notewell.ingest.chunking import ChunkSettings, chunk_note
from notewell.notes import Chunk, Note

SETTINGS = BuildSettings("fake-hash:64", 64, ChunkSettings().fingerprint())


def make_note(note_id: str, text: str, tags=()) -> Note:
    return Note(note_id=note_id, source="s", kind="markdown", title=note_id.split(":")[1],
                text=text, url=f"file:///{note_id}", tags=tuple(tags), fingerprint="f1")


def store_note(index: Index, embedder, note: Note) -> list[str]:
    rows, texts = [], []
    for chunk in chunk_note(note.title, note.text):
        t = chunk.embed_text(note.title)
        rows.append((chunk, note.url, Chunk.text_hash(t)))
        texts.append(t)
    missing = sorted(index.missing_embeddings(h for _, _, h in rows))
    by_hash = dict(zip((h for _, _, h in rows), texts))
    if missing:
        index.add_embeddings(missing, embedder.embed_batch([by_hash[h] for h in missing]))
    index.replace_note(note, rows)
    return missing


def current_copies(index: Index) -> Held:
    """The copies a read view taken now would answer from (``Copies.current``: it loads
    nothing)."""
    return index.copies.current(sql.freshness(index.db))


def vocabulary_docs(vocab: Vocabulary) -> dict[str, int]:
    """Each term of ``vocab`` with the number of chunks holding it, added chunks counted."""
    found = {t: int(vocab.dfs[i]) for t, i in vocab.index.items()}
    for t, n in vocab.extra.items():
        found[t] = found.get(t, 0) + n
    return found


def index_at_schema(path: str, monkeypatch, version: int) -> Index:
    """An index as a notewell with ``version`` migrations left it; opening the file again
    runs the rest."""
    every = schema.migrations
    monkeypatch.setattr(schema, "migrations", lambda dim: every(dim)[:version])
    old = Index(path, SETTINGS)
    monkeypatch.setattr(schema, "migrations", every)
    return old
