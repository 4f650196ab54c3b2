"""Keywords in every script: Chinese, Japanese and Korean found by keyword (character
pairs, ``index.cjk``), accents folded, English untouched, and the migration that rewrites
an older index's CJK rows."""

from __future__ import annotations

import pytest
from helpers import write_notes
from index_helpers import current_copies, vocabulary_docs
from notewell import config
from notewell.engine import Engine
from notewell.index import cjk, keywords, schema
from notewell.index.database import Index
from notewell.index.terms import read_vocabulary
from notewell.search.query import fts_terms, parse

NOTES = {
    "zh/home.md": "# 住所\n\n我住在东京附近，每天坐电车上班。\n",
    "zh/food.md": "# 饺子\n\n周末在家包饺子，用猪肉和白菜。\n",
    "ja/db.md": "# データベースの設計\n\nテーブルの正規化とインデックスについてのメモ。\n",
    "ja/travel.md": "# 京都旅行\n\n秋の京都で紅葉を見た。\n",
    "ko/seoul.md": "# 서울 여행\n\n서울에서 비빔밥을 먹었다.\n",
    "de/cafe.md": "# Café Müller\n\nDer Kaffee bei Müller in Köln ist gut.\n",
    "en/postgres.md": "# Postgres vacuum\n\nRun VACUUM ANALYZE after a bulk delete.\n",
    "mixed.md": "# SQLite数据库\n\nSQLite数据库的全文检索。\n",
}


@pytest.fixture
def cjk_engine(tmp_path, home, fake_embedder):
    notes = write_notes(tmp_path / "notes", NOTES)
    config.save(config.Config(sources=(config.SourceConfig("n", "markdown", str(notes)),)))
    engine = Engine(config.load(), embedder=fake_embedder)
    engine.sync()
    yield engine
    engine.close()


def titles(engine: Engine, query: str) -> list[str]:
    with engine.reading() as view:
        return [h.title for h in view.search(query, mode="bm25").hits]


def test_pairs_leave_other_text_exactly_as_it_was():
    assert cjk.segment("我住在东京附近").split() == ["我住", "住在", "在东", "东京", "京附",
                                                  "附近", "近"]
    assert cjk.segment_query("データベース").split() == ["デー", "ータ", "タベ", "ベー", "ース"]
    assert cjk.segment_query("东") == " 东 " and cjk.is_single("东")
    for text in ("Café Müller", "plain English text, with punctuation!", "", "naïve 42"):
        assert cjk.segment(text) is text or cjk.segment(text) == text
    assert fts_terms(("postgres", "vac"), True) == ['"postgres"', '"vac"*']
    assert fts_terms(("东京", "京"), False) == ['"东京"', '"京"*']
    # A query's CJK runs are its pairs, each a word; other words stay as they were.
    assert parse("红烧肉怎么做").words == ("红烧", "烧肉", "肉怎", "怎么", "么做")
    assert parse("sqlite数据库 vacuum").words == ("sqlite", "数据", "据库", "vacuum")
    assert parse("Café Müller").words == ("café", "müller")


@pytest.mark.parametrize("copy", [False, True])
def test_chinese_japanese_and_korean_are_found_by_keyword(cjk_engine, copy):
    if copy:  # the daemon's keyword copy answers the single-term words
        cjk_engine.index.warm_keywords(wait=True)
        assert current_copies(cjk_engine.index).keywords is not None
    assert titles(cjk_engine, "东京 ") == ["住所"]
    assert titles(cjk_engine, "データベース ") == ["データベースの設計"]
    assert titles(cjk_engine, "饺子 ") == ["饺子"]
    assert titles(cjk_engine, "서울 ") == ["서울 여행"]
    assert titles(cjk_engine, "数据库 ") == ["SQLite数据库"]
    assert set(titles(cjk_engine, "京 ")) == {"住所", "京都旅行"}  # one character: anywhere
    # As typed: a word cut short still finds its note.
    assert titles(cjk_engine, "データベ")[0] == "データベースの設計"
    # Written without spaces, a query need not appear verbatim: its pairs are words.
    assert titles(cjk_engine, "红烧肉怎么做 ") == []  # not in the corpus: nothing shared
    assert titles(cjk_engine, "饺子怎么包 ")[0] == "饺子"
    assert titles(cjk_engine, "东附 ") == []  # characters apart are no pair
    assert titles(cjk_engine, "postgres")[0] == "Postgres vacuum"


def test_accents_are_folded_both_ways(cjk_engine):
    assert titles(cjk_engine, "cafe ") == ["Café Müller"]
    assert titles(cjk_engine, "Muller ") == ["Café Müller"]
    assert titles(cjk_engine, "koln ") == ["Café Müller"]


def test_migration_4_rewrites_only_the_cjk_rows(tmp_path, monkeypatch, fake_embedder):
    from index_helpers import SETTINGS, index_at_schema, make_note, store_note

    path = str(tmp_path / "i.sqlite")
    old = index_at_schema(path, monkeypatch, 3)
    # As notewell before pairs wrote them: whole runs.
    monkeypatch.setattr(keywords, "segment", lambda text: text)
    store_note(old, fake_embedder, make_note("s:zh", "我住在东京附近，每天坐电车上班。"))
    store_note(old, fake_embedder, make_note("s:en", "Run VACUUM ANALYZE after a bulk delete."))
    monkeypatch.undo()
    before = vocabulary_docs(read_vocabulary(old.db))
    assert "东京" not in before
    epoch = old.db.execute("SELECT value FROM meta WHERE key = 'chunks_epoch'").fetchone()
    old.close()
    new = Index(path, SETTINGS)
    assert new.db.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    after = vocabulary_docs(read_vocabulary(new.db))
    assert after["东京"] == 1 and after["近"] == 1
    assert {t: n for t, n in after.items() if t.isascii()} == {
        t: n for t, n in before.items() if t.isascii()}
    assert new.db.execute("SELECT value FROM meta WHERE key = 'chunks_epoch'").fetchone() != epoch
    assert new.consistency_problems() == []
    assert len(new.reads.fts5_bm25('"东京"', 5)) == 1
    new.close()


def test_text_without_spaces_is_chunked_to_the_models_budget():
    from notewell.ingest.chunking import ChunkSettings, chunk_note, count_pieces

    assert count_pieces("我住在东京附近，每天坐电车上班。") == 16
    assert count_pieces("Hello, world foo_bar 42") == 5  # English as before
    text = "# 长\n\n" + "我住在东京附近，每天坐电车上班。" * 40
    chunks = chunk_note("长", text)
    budget = ChunkSettings().max_pieces
    assert len(chunks) > 1 and all(count_pieces(c.text) <= budget for c in chunks)
    assert "".join(c.text for c in chunks).count("东京") >= 40  # nothing lost (overlap adds)
