"""The sync's steps, each alone (issue 34.4): ``diff`` of a scan against the stored
fingerprints (no I/O), ``load`` of one changed note (what to do with it), ``write`` of a
batch (stopped mid-embedding), the unreadable-note memo and its owner, and the counters
of a sync stopped halfway, counted once."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import RecordingEmbedder
from notewell.index.database import Index, StoredNote
from notewell.index.schema import BuildSettings
from notewell.ingest import sync
from notewell.ingest.chunking import ChunkSettings
from notewell.ingest.sync import (
    GONE,
    SKIP,
    TOUCH,
    UNREADABLE,
    WRITE,
    Syncer,
    UnreadableNotes,
    diff,
)
from notewell.notes import Note, NoteStub
from notewell.sources import Listing, SourceWarning
from reliability_helpers import FakeClock

CHUNKER = ChunkSettings()
SETTINGS = BuildSettings("fake-hash:64", 64, CHUNKER.fingerprint())


def sections(tag: str, n: int = 5) -> str:
    """Text of ``n`` sections: ``n`` passages to embed."""
    return "\n\n".join(f"## Part {tag} {j}\n\n" + " ".join(f"{tag}w{j}x{k}" for k in range(30))
                       for j in range(n))


def note(rel: str, text: str = "Some words.", url: str | None = None, version: int = 1
         ) -> Note:
    return Note(note_id=f"s:{rel}", source="s", kind="markdown", title=rel.title(),
                text=f"{text} {rel}", url=url or f"file:///n/{rel}", path=f"/n/{rel}",
                fingerprint=f"f{version}")


class Source:
    """A source in memory: ``notes`` by id (None: gone, an exception: unreadable)."""

    name, kind = "s", "markdown"

    def __init__(self, notes: dict) -> None:
        self.notes = notes
        self.loads: list[str] = []

    def scan(self) -> Listing:
        return Listing(NoteStub(i, n.fingerprint if isinstance(n, Note) else "x")
                       for i, n in self.notes.items())

    def load(self, note_id: str) -> Note | None:
        self.loads.append(note_id)
        found = self.notes[note_id]
        if isinstance(found, Exception):
            raise found
        return found

    def passage_url(self, n: Note, anchor: str | None, line: int | None = None) -> str:
        return n.url


@pytest.fixture
def index(tmp_path: Path):
    ix = Index(str(tmp_path / "index.sqlite"), SETTINGS)
    yield ix
    ix.close()


def stored(*rows: tuple[str, str]) -> dict[str, StoredNote]:
    return {n: StoredNote(i, n, f, "h") for i, (n, f) in enumerate(rows)}


def test_diff_names_what_to_delete_read_and_leave():
    listing = Listing([NoteStub("s:a", "f1"), NoteStub("s:b", "f2"), NoteStub("s:new", "f1")],
                      unreadable=["s:locked/"], offloaded=["s:cloud.md"])
    have = stored(("s:a", "f1"), ("s:b", "f1"), ("s:gone", "f1"), ("s:locked/x", "f1"),
                  ("s:cloud.md", "f1"))
    plan = diff(listing, have)
    assert plan.gone == ["s:gone"]  # not under an unreadable folder, not offloaded
    assert [s.note_id for s in plan.todo] == ["s:b", "s:new"]
    assert (plan.unchanged, plan.offloaded) == (1, 1)


def test_load_says_what_to_do_with_each_note(index):
    same = note("same")
    moved = note("moved", url="file:///elsewhere/moved")
    src = Source({"s:same": same, "s:moved": moved, "s:edit": note("edit", "New words."),
                  "s:new": note("new"), "s:gone": None, "s:never": None,
                  "s:bad": SourceWarning("bad.md: looks binary")})
    syncer = Syncer(index, RecordingEmbedder(), CHUNKER)

    def old(n: Note, url: str | None = None) -> StoredNote:
        return StoredNote(1, n.note_id, "f0", n.content_hash, url or n.url, n.path)

    def action(note_id: str, stored_as: StoredNote | None) -> str:
        return syncer.load(src, NoteStub(note_id, "f1"), stored_as).action

    assert action("s:same", old(same)) == TOUCH
    # Same text at another place (a moved folder): written again, to move its links.
    assert action("s:moved", old(moved, url="file:///n/moved")) == WRITE
    assert action("s:edit", old(note("edit"))) == WRITE
    assert action("s:new", None) == WRITE
    assert action("s:gone", old(same)) == GONE
    assert action("s:never", None) == SKIP
    loaded = syncer.load(src, NoteStub("s:bad", "f1"), None)
    assert (loaded.action, loaded.warnings) == (UNREADABLE, ["bad.md: looks binary"])


def test_an_unreadable_note_is_remembered_by_its_owner_not_the_module(index):
    src = Source({"s:bad": SourceWarning("bad.md: looks binary")})
    clock = FakeClock()
    memo = UnreadableNotes()
    stub = NoteStub("s:bad", "x")
    first = Syncer(index, RecordingEmbedder(), CHUNKER, clock=clock, unreadable=memo)
    assert first.load(src, stub, None).action == UNREADABLE
    # Another syncer with the same owner (the engine's next sync): not read again...
    again = Syncer(index, RecordingEmbedder(), CHUNKER, clock=clock, unreadable=memo)
    assert again.load(src, stub, None).action == SKIP and src.loads == ["s:bad"]
    # ...until the file changes, or the interval passes.
    assert again.load(src, NoteStub("s:bad", "y"), None).action == UNREADABLE
    clock.advance(sync.RETRY_UNREADABLE)
    assert again.load(src, NoteStub("s:bad", "y"), None).action == UNREADABLE
    # A syncer of its own keeps its own memo: nothing is shared through the module.
    fresh = Syncer(index, RecordingEmbedder(), CHUNKER, clock=clock)
    assert fresh.load(src, NoteStub("s:bad", "y"), None).action == UNREADABLE
    assert len(src.loads) == 4


def test_write_stopped_mid_embedding_leaves_out_the_notes_it_could_not_finish(index):
    notes = [note(f"n{i}", sections(f"n{i}")) for i in range(3)]
    src = Source({n.note_id: n for n in notes})
    steps = iter(())  # the first step embeds; a stop is asked before the second
    emb = RecordingEmbedder()
    syncer = Syncer(index, emb, CHUNKER, should_stop=lambda: next(steps, True))
    out = syncer.write(src, notes)
    assert len(emb.texts) == sync.EMBED_STEP  # one step of the model, then stopped
    assert out.embedded == sync.EMBED_STEP
    assert len(out.notes) < len(notes)
    written = {n.note_id for n in out.notes}
    assert set(index.stored_notes("s")) == written
    # Done: the rest is embedded once, the vectors stored before reused.
    rest = Syncer(index, emb, CHUNKER).write(src, notes)
    assert len(rest.notes) == 3 and rest.reused >= sync.EMBED_STEP


def test_a_stopped_sync_counts_only_the_notes_it_wrote(index):
    """Two notes stored, edited, and one new; the sync stops during the model's second
    call: added and updated count the notes written, pending the rest, once each."""
    first = {f"s:n{i}": note(f"n{i}", " ".join(f"w{i}y{j}" for j in range(3)))
             for i in range(2)}
    syncer = Syncer(index, RecordingEmbedder(), CHUNKER)
    assert syncer.sync(Source(first)).added == 2
    edited = {i: note(f"n{k}", sections(f"v{k}", 12), version=2) for k, i in enumerate(first)}
    edited["s:n9"] = note("n9", sections("u9", 12))
    calls = iter([False] * 3)  # three notes considered, then one model step
    stopper = Syncer(index, RecordingEmbedder(), CHUNKER,
                     should_stop=lambda: next(calls, True))
    report = stopper.sync(Source(edited))
    written = {n for n, s in index.stored_notes("s").items() if s.fingerprint == "f2"} | (
        {"s:n9"} & set(index.stored_notes("s")))
    assert report.added + report.updated == len(written) < 3
    assert report.updated == len(written - {"s:n9"})
    assert report.pending == 3 - len(written)
    assert report.embedded == sync.EMBED_STEP
