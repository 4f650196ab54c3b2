"""Title vectors: one vector of each note's title alone, found by k-NN beside the passages
but never shown, never a keyword row, and embedded alone when an upgrade re-chunks an
index cut before them (chunker version 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import RecordingEmbedder
from index_helpers import current_copies
from notewell import cli
from notewell.config import Config, SourceConfig
from notewell.engine import Engine
from notewell.index import schema, store
from notewell.index.schema import connect
from notewell.ingest.chunking import ChunkSettings
from notewell.model.fake import FakeEmbedder
from notewell.notes import Chunk
from notewell.search.ranking import Ranking

FILLER = " ".join(f"filler{i}" for i in range(60))
# "Quokka habitat" is named only by its title: its passage is 60 other words, so only its
# title vector is near the query. "Island animals" says the words in passing.
QUOKKA = {
    "wild/quokka.md": f"# Quokka habitat\n\n{FILLER}\n\n#wild\n",
    "wild/island.md": "# Island animals\n\nThe quokka keeps to a small habitat on an "
                      "island with other animals and birds. #wild\n",
    "home/tea.md": "# Green tea\n\nSteep green tea leaves for two minutes. #home\n",
}


def write(root: Path, notes: dict[str, str]) -> Path:
    for rel, text in notes.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def config_for(folder: Path) -> Config:
    return Config(sources=(SourceConfig("notes", "markdown", str(folder)),))


def ids(result) -> list[str]:
    return [h.note_id for h in result.hits]


@pytest.fixture
def quokka(tmp_path: Path) -> Config:
    return config_for(write(tmp_path / "notes", QUOKKA))


def test_each_note_has_one_title_vector_that_is_no_passage_and_no_keyword_row(tmp_path,
                                                                             quokka):
    engine = Engine(quokka, embedder=FakeEmbedder(), index_dir=str(tmp_path / "i"))
    engine.sync()
    db = engine.index.db
    one = lambda sql: db.execute(sql).fetchone()[0]  # noqa: E731
    assert one("SELECT count(*) FROM titles") == one("SELECT count(*) FROM notes") == 3
    # The passages and keyword rows are the version 1 chunker's: the title adds neither.
    assert one("SELECT count(*) FROM chunks") == one("SELECT count(*) FROM chunks_fts") == 3
    with engine.reading() as view:
        assert view.status()["chunks"] == 3
    assert engine.index.consistency_problems() == []
    # The title vector reads the title, and the path that the keyword side searches with
    # it, stored under their hash like any passage's.
    assert one("SELECT e.hash FROM titles t JOIN embeddings e ON e.id = t.embedding "
               "JOIN notes n ON n.id = t.note WHERE n.title = 'Quokka habitat'"
               ) == Chunk.text_hash("Quokka habitat\nwild/quokka")
    # Pruning keeps the vectors titles use, even with nothing else to keep them.
    engine.index.prune_embeddings(keep_ratio=0.0)
    assert engine.index.consistency_problems() == []
    engine.close()


@pytest.mark.parametrize("query", ["quokka habitat", "#wild quokka habitat"],
                         ids=["unfiltered", "filtered"])
def test_a_title_makes_its_note_a_candidate_and_the_hit_shows_a_passage(tmp_path, quokka,
                                                                        query):
    # k-NN one vector deep: only the title vector of "Quokka habitat" is found.
    engine = Engine(quokka, embedder=FakeEmbedder(), index_dir=str(tmp_path / "i"),
                    ranking=Ranking(dense_k=1))
    engine.sync()
    with engine.reading() as view:
        hits = view.search(query, mode="dense").hits
    assert hits[0].note_id == "notes:wild/quokka.md"
    top = hits[0]
    assert top.passage.startswith("filler0") and top.heading_path == ""
    # SQLite answers the same without the in-memory copies (a one-shot command).
    settings = engine.index.copies.settings
    settings.vectors = settings.keywords = False
    with engine.reading() as view:
        assert [h.note_id for h in view.search(query, mode="dense").hits] == [
            h.note_id for h in hits]
    engine.close()
    # The title's lead is what puts it first: without it, the passage that says the
    # words wins.
    for lead, first in ((0.5, "notes:wild/quokka.md"), (0.0, "notes:wild/island.md")):
        engine = Engine(quokka, embedder=FakeEmbedder(), index_dir=str(tmp_path / "i"),
                        ranking=Ranking(title_lead=lead))
        with engine.reading() as view:
            assert ids(view.search(query, mode="dense"))[0] == first
        engine.close()


def test_the_titles_lead_over_the_best_passage_counts_at_half(tmp_path, quokka):
    engine = Engine(quokka, embedder=FakeEmbedder(), index_dir=str(tmp_path / "i"))
    engine.sync()
    searcher, model = engine.searcher, FakeEmbedder()
    vector = model.embed_batch(["quokka"])[0]
    row = engine.index.reads.note_row("notes:wild/quokka.md")
    (chunk_id, _, _), = engine.index.reads.note_chunks([row])
    passage = searcher.cosines(vector, [chunk_id])[chunk_id]
    title = float(model.embed_batch(["Quokka habitat\nwild/quokka"])[0] @ vector)
    assert title > passage
    found = [(row, 1.0 - title)]  # as the k-NN gives it
    raised = searcher.with_titles(vector, {chunk_id: passage}, found)
    assert raised[chunk_id] == pytest.approx(passage + 0.5 * (title - passage), abs=1e-5)
    # A title behind its note's best passage takes nothing away.
    assert searcher.with_titles(vector, {chunk_id: 0.9}, found) == {chunk_id: 0.9}
    engine.close()


def test_similar_compares_passages_not_titles(tmp_path):
    """Notes named alike are not alike: ``similar`` ranks by the passages' mean vectors,
    so two "Config" pages of different things do not pull each other up."""
    folder = write(tmp_path / "notes", {
        "a.md": "# Config\n\nApples pears orchard harvest cider press autumn.\n",
        "b.md": "# Config\n\nEngines pistons gearbox clutch exhaust torque.\n",
        "c.md": "# Fruit\n\nApples pears orchard harvest cider press.\n",
    })
    engine = Engine(config_for(folder), embedder=FakeEmbedder(),
                    index_dir=str(tmp_path / "i"))
    engine.sync()
    with engine.reading() as view:
        assert [h.note_id for h in view.similar("notes:a.md")][:2] == ["notes:c.md",
                                                                          "notes:b.md"]
    engine.close()


def old_index(cfg: Config, index_dir: str) -> tuple[str, set[str]]:
    """An index as notewell wrote it before title vectors: cut by chunker version 1, in
    schema 5 (no ``titles`` table). Returns its path and the texts embedded."""
    model = RecordingEmbedder()
    engine = Engine(cfg, embedder=model, chunker=ChunkSettings(version=1),
                    index_dir=index_dir)
    engine.sync()
    path = engine.index.path
    engine.close()
    db = connect(path)
    db.execute("DROP TABLE titles")
    db.execute("PRAGMA user_version=5")
    db.close()
    return path, set(model.texts)


def test_an_index_cut_before_title_vectors_is_re_chunked_embedding_only_the_titles(
        tmp_path, notes_dir):
    cfg = config_for(notes_dir)
    d = str(tmp_path / "index")
    first, before = old_index(cfg, d)
    model = RecordingEmbedder()
    engine = Engine(cfg, embedder=model, index_dir=d)
    assert engine.index.other_chunker == ChunkSettings(version=1).fingerprint()
    with engine.reading() as view:
        assert view.status()["re_chunking"]
    # The old file answers meanwhile (migrated in place: an empty titles table).
    with engine.reading() as view:
        assert ids(view.search("postgres vacuum"))[0] == "notes:db/postgres-vacuum.md"
    model.texts.clear()  # the query's
    events: list[tuple[str, int]] = []

    class Bars:
        def __init__(self, label: str, total: int) -> None:
            events.append((label, total))

        def advance(self, n: int = 1) -> None:
            pass

        def close(self) -> None:
            pass

    reports = engine.sync(progress=lambda label, total: Bars(label, total))
    assert engine.index.path != first and store.current_path(d) == engine.index.path
    assert schema.read_meta(engine.index.db)["chunker"] == ChunkSettings().fingerprint()
    titles = {f"{title}\n{json.loads(aliases)[-1]}" for title, aliases in
              engine.index.db.execute("SELECT title, aliases FROM notes")}
    # Nothing but the titles went to the model; every passage vector was reused.
    assert sorted(model.texts) == sorted(titles) and not set(model.texts) & before
    assert sum(r.embedded for r in reports) == len(titles)
    assert sum(r.reused for r in reports) == len(before)
    assert events == [("indexing notes", len(titles))]
    assert engine.index.consistency_problems() == []
    with engine.reading() as view:
        assert not view.status()["re_chunking"]
        assert ids(view.search("postgres vacuum"))[0] == "notes:db/postgres-vacuum.md"
    engine.close()


def test_notewell_index_re_chunks_an_old_index_with_progress_and_no_question(
        tmp_path, notes_config, home, capsys):
    d = str(home / "index")
    old_index(notes_config, d)
    capsys.readouterr()
    model = RecordingEmbedder()
    assert cli.main(["index"], embedder=lambda: model) == 0
    out, err = capsys.readouterr()
    assert "indexing notes" in err and "4 embedded" in out
    assert sorted(model.texts) == ["Banana bread\nkitchen/banana-bread",
                                   "Lisbon weekend\ntravel/lisbon",
                                   "Postgres vacuum\ndb/postgres-vacuum",
                                   "Undo the last commit\ngit/undo-commit"]
    engine = Engine(notes_config, embedder=FakeEmbedder(), index_dir=d)
    assert engine.index.other_chunker is None
    assert engine.index.db.execute("SELECT count(*) FROM titles").fetchone()[0] == 4
    engine.close()


def test_the_keyword_copy_follows_the_title_vectors_through_small_syncs(tmp_path, quokka):
    from notewell.index import sql

    folder = Path(quokka.sources[0].path)
    engine = Engine(quokka, embedder=FakeEmbedder(), index_dir=str(tmp_path / "i"))
    engine.sync()
    index = engine.index
    index.warm_keywords(wait=True)

    def both() -> tuple[set, set]:
        copy = current_copies(index).keywords
        assert copy is not None  # brought along, not rebuilt
        notes = [r[0] for r in index.db.execute("SELECT id FROM notes")]
        vectors = [r[1] for r in sql.title_rows(index.db)]
        return ({*copy.titles.of_notes(notes), *copy.titles.of_vectors(vectors)},
                set(sql.title_rows(index.db)))

    before = both()
    assert before[0] == before[1] and len(before[1]) == 3
    (folder / "home/tea.md").write_text("# Black tea\n\nSteep for four minutes.\n")
    (folder / "wild/island.md").unlink()
    engine.sync()
    copy, stored = both()
    assert copy == stored and len(stored) == 2 and stored != before[1]
    engine.close()
