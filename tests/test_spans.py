"""Why a note matched (issue 35.3): the spans of the query's words in each hit's passage and
snippet, as FTS5 reads words (stems, the word being typed, accents, CJK pairs, typos), the
nearest sentence for a hit found by meaning alone, and a note's next best passages."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest
from notewell.search.spans import merged, nearest_sentence, sentences


def marked(text: str, spans) -> list[str]:
    return [text[s:e] for s, e in spans]


def hit_of(result, note_id: str):
    return next(h for h in result.hits if h.note_id == note_id)


@pytest.fixture
def words_engine(engine, notes_dir):
    (notes_dir / "runs.md").write_text(
        "# Runner\n\nIntro line without the word.\nShe was running the nightly "
        "backups. Runs finish by six.\nEvery day counts.\n")
    (notes_dir / "cafe.md").write_text("# Visits\n\nThe Café in Porto was crowded.\n")
    (notes_dir / "tokyo.md").write_text("# 旅行\n\n我住在东京附近。每天坐电车。\n")
    engine.sync()
    return engine


def test_stemmed_words_are_marked_where_the_passage_has_them(words_engine):
    # JSON answers (passages > 1) tokenize the whole passage.
    with words_engine.reading() as view:
        hit = hit_of(view.search("runs ", mode="bm25", passages=3), "notes:runs.md")
    assert marked(hit.passage, hit.spans) == ["running", "Runs"]
    assert hit.snippet == "Runs finish by six. Every day counts."
    assert marked(hit.snippet, hit.snippet_spans) == ["Runs"]
    # The launcher's list (one passage a hit, every keystroke) tokenizes only the
    # snippet; its passage marks the same words as written.
    with words_engine.reading() as view:
        hit = hit_of(view.search("runs ", mode="bm25"), "notes:runs.md")
    assert marked(hit.snippet, hit.snippet_spans) == ["Runs"]
    assert marked(hit.passage, hit.spans) == ["Runs"]
    # A stem need not be how its word starts: "days" and "day" are both "dai".
    with words_engine.reading() as view:
        hit = hit_of(view.search("days ", mode="bm25"), "notes:runs.md")
    assert marked(hit.passage, hit.spans) == ["day"]


def test_the_word_being_typed_marks_the_words_it_starts(words_engine):
    with words_engine.reading() as view:
        hit = hit_of(view.search("nightly back", mode="bm25"), "notes:runs.md")
    assert marked(hit.passage, hit.spans) == ["nightly", "backups"]


def test_accents_are_folded_as_the_index_folds_them(words_engine):
    with words_engine.reading() as view:
        hit = hit_of(view.search("cafe ", mode="bm25"), "notes:cafe.md")
    assert marked(hit.passage, hit.spans) == ["Café"]
    # Offsets are characters, not UTF-8 bytes: what follows the accent is found too.
    with words_engine.reading() as view:
        hit = hit_of(view.search("café porto ", mode="bm25"), "notes:cafe.md")
    assert marked(hit.passage, hit.spans) == ["Café", "Porto"]


def test_cjk_pairs_are_marked_as_written(words_engine):
    with words_engine.reading() as view:
        hit = hit_of(view.search("东京附近", mode="bm25"), "notes:tokyo.md")
    assert marked(hit.passage, hit.spans) == ["东京附近"]  # three pairs, one span
    with words_engine.reading() as view:
        hit = hit_of(view.search("电车", mode="bm25"), "notes:tokyo.md")
    assert marked(hit.passage, hit.spans) == ["电车"]


def test_a_typo_marks_the_word_meant(engine):
    with engine.reading() as view:
        hit = hit_of(view.search("postgress vaccum", mode="bm25"), "notes:db/postgres-vacuum.md")
    assert [w.lower() for w in marked(hit.passage, hit.spans)] == ["vacuum"]
    # Being typed: corrected as a prefix.
    with engine.reading() as view:
        hit = hit_of(view.search("bananna", mode="bm25"), "notes:kitchen/banana-bread.md")
    assert marked(hit.passage, hit.spans) == ["bananas"]


def test_a_hit_by_meaning_alone_marks_its_nearest_sentence(words_engine):
    # No word of the query is in the passage; "nightshift" shares "nigh" with "nightly".
    with words_engine.reading() as view:
        hit = hit_of(view.search("nightshift", mode="dense", limit=50), "notes:runs.md")
    assert marked(hit.passage, hit.spans) == ["She was running the nightly backups."]


def test_nearest_sentence_prefers_shared_word_beginnings_then_the_first():
    text = "Alpha beta.\nThe organization of files matters. Gamma."
    assert marked(text, [nearest_sentence(text, ("organise", "folders"))]) == [
        "The organization of files matters."]
    assert marked(text, [nearest_sentence(text, ("zebra",))]) == ["Alpha beta."]
    assert marked(text, sentences(text)) == [
        "Alpha beta.", "The organization of files matters.", "Gamma."]
    assert merged([(5, 7), (0, 2), (1, 3), (3, 4)]) == [(0, 4), (5, 7)]


def test_recent_and_similar_notes_mark_nothing(engine):
    assert all(h.spans == [] for h in engine.searcher.recent(5))
    hits = engine.searcher.similar("notes:kitchen/banana-bread.md")
    assert hits and all(h.spans == [] for h in hits)


def test_json_hits_keep_every_key_and_add_spans_and_passages(engine):
    with engine.reading() as view:
        hit = view.search("vacuum ").hits[0].to_dict()
    old = {"note_id", "title", "source", "kind", "url", "path", "tags", "heading_path",
           "snippet", "passage", "score", "modified", "archived", "attachment"}
    assert old < set(hit)
    assert set(hit) - old == {"spans", "snippet_spans", "passages"}
    assert [hit["passage"][s:e] for s, e in hit["spans"]] == ["VACUUM"]
    assert hit["passages"] == [{"text": hit["passage"], "heading_path": hit["heading_path"],
                                "spans": hit["spans"], "score": hit["score"]}]


def test_a_json_search_lists_the_notes_next_best_passages(engine, notes_dir):
    filler = " ".join(f"word{i}" for i in range(60))
    (notes_dir / "long.md").write_text(
        f"# Garden\n\n## Soil\n\nCompost the soil in spring. {filler}\n\n"
        f"## Water\n\nWater the compost heap weekly. {filler}\n\n"
        f"## Light\n\nTomatoes want compost and sun. {filler}\n\n"
        f"## Other\n\nNothing here. {filler}\n")
    engine.sync()
    with engine.reading() as view:
        one = hit_of(view.search("compost ", mode="bm25"), "notes:long.md")
    assert one.passages == [] and len(one.to_dict()["passages"]) == 1
    with engine.reading() as view:
        hit = hit_of(view.search("compost ", mode="bm25", passages=3), "notes:long.md")
    assert len(hit.passages) == 3
    assert hit.passages[0]["text"] == hit.passage
    scores = [p["score"] for p in hit.passages]
    assert scores == sorted(scores, reverse=True)
    for p in hit.passages:
        assert [p["text"][s:e].lower() for s, e in p["spans"]] == ["compost"]
    assert {p["heading_path"] for p in hit.passages} == {"Soil", "Water", "Light"}


# -- Alfred: the subtitle at the first match, Quick Look with the words marked -------------

def alfred_hit(**over):
    from notewell.notes import Hit

    snippet = "Some words before the point, then the vacuum runs nightly at three."
    base = dict(note_id="notes:db/pg.md", title="Postgres <care>", source="notes",
                kind="markdown", url="file:///n/db/pg.md", path="/n/db/pg.md", tags=[],
                heading_path="Vacuum", snippet=snippet, passage=snippet, score=0.5,
                spans=[(38, 44)], snippet_spans=[(38, 44)])
    base.update(over)
    return Hit(**base)


def test_alfred_subtitle_starts_a_few_words_before_the_first_match():
    from notewell.launcher import alfred

    item = alfred.hit_item(alfred_hit(), "vacuum")
    assert item["subtitle"] == "Vacuum · …the point, then the vacuum runs nightly at three."
    # A match near the start, or none: the snippet as it is.
    near = alfred_hit(snippet="The vacuum runs.", snippet_spans=[(4, 10)])
    assert alfred.hit_item(near)["subtitle"] == "Vacuum · The vacuum runs."
    assert alfred.hit_item(alfred_hit(snippet_spans=[]))["subtitle"] == (
        "Vacuum · Some words before the point, then the vacuum runs nightly at three.")


def test_alfred_item_exactly_with_a_preview():
    from notewell.launcher import alfred

    item = alfred.hit_item(alfred_hit(), "vacuum", preview="/h/cache/previews/ab.html")
    assert item["quicklookurl"] == "/h/cache/previews/ab.html"
    assert item["type"] == "file:skipcheck" and item["action"] == {"file": "/n/db/pg.md"}
    bear = alfred.hit_item(alfred_hit(kind="bear", path=None, url="bear://x"), "vacuum",
                           preview="/h/cache/previews/cd.html")
    assert bear["quicklookurl"] == "/h/cache/previews/cd.html"
    assert "type" not in bear and bear["action"] == {"url": "bear://x"}
    doc = json.loads(alfred.results_feedback([alfred_hit()], [], "vacuum",
                                             previews=["/p.html"]))
    assert doc["items"][0]["quicklookurl"] == "/p.html"
    assert doc["items"][0]["subtitle"].startswith("Vacuum · …the point")


def test_preview_marks_the_words_and_escapes_the_note(home, tmp_path):
    from notewell.launcher import quicklook
    from notewell.wire import paths

    hit = alfred_hit(passage="a <b>vacuum</b> & more\nnext line", spans=[(5, 11)])
    (path,) = quicklook.write_previews([hit])
    assert os.path.dirname(path) == paths.preview_dir()
    assert path.startswith(str(home) + os.sep)
    assert stat.S_IMODE(os.stat(paths.preview_dir()).st_mode) == 0o700
    page = Path(path).read_text(encoding="utf-8")
    assert "a &lt;b&gt;<mark>vacuum</mark>&lt;/b&gt; &amp; more\nnext line" in page
    assert "<title>Postgres &lt;care&gt;</title>" in page and "<care>" not in page
    # The same hit again: the same file, nothing new written.
    assert quicklook.write_previews([hit]) == [path]
    assert len(os.listdir(paths.preview_dir())) == 1


def test_previews_stay_bounded_least_recently_shown_first(home, monkeypatch):
    from notewell.launcher import quicklook
    from notewell.wire import paths

    monkeypatch.setattr(quicklook, "MAX_PREVIEWS", 5)
    monkeypatch.setattr(quicklook, "_PRUNED_TO", 3)
    old = quicklook.write_previews([alfred_hit(passage="zero")])[0]
    os.utime(old, (1, 1))  # written long ago, by another process
    w = quicklook.Writer()
    kept = w.job([alfred_hit(passage="kept")])
    w.write(kept)
    for i in range(3):
        w.write(w.job([alfred_hit(passage=f"passage {i}", spans=[])]))
    os.utime(kept.paths[0], (2, 2))  # its file's age is not what counts
    assert w.write(kept) == 0  # shown again: nothing written, the most recent now
    assert len(os.listdir(paths.preview_dir())) == 5
    w.write(w.job([alfred_hit(passage="one more")]))  # six: down to three
    left = os.listdir(paths.preview_dir())
    assert len(left) == 3 and os.path.basename(old) not in left
    assert os.path.basename(kept.paths[0]) in left
    # A page another process removed is written again.
    os.remove(kept.paths[0])
    assert w.write(kept) == 1 and os.path.exists(kept.paths[0])


def test_a_preview_that_cannot_be_written_leaves_quick_look_on_the_file(home):
    from notewell.launcher import quicklook
    from notewell.wire import paths

    os.makedirs(paths.cache_dir(), exist_ok=True)
    open(paths.preview_dir(), "w").close()  # a file where the folder should be
    assert quicklook.write_previews([alfred_hit()]) == [None]


def test_the_daemon_answers_alfred_with_previews_in_its_cache_never_beside_notes(
        daemon, home, notes_dir):
    reply = daemon.ask("search", query="vacuum analyze", format="alfred")["result"]
    doc = json.loads(reply["alfred"])
    item = next(i for i in doc["items"] if i.get("uid") == "notes:db/postgres-vacuum.md")
    preview = item["quicklookurl"]
    assert preview.startswith(os.path.join(str(home), "cache", "previews") + os.sep)
    assert not preview.startswith(str(notes_dir))
    # Written by the daemon's preview thread once the answer is out.
    deadline = time.monotonic() + 20
    while not os.path.exists(preview) and time.monotonic() < deadline:
        time.sleep(0.05)
    page = Path(preview).read_text(encoding="utf-8")
    assert "<mark>VACUUM</mark> <mark>ANALYZE</mark>" in page
    assert not [p for p in notes_dir.rglob("*") if p.suffix == ".html"]
    # JSON clients get the spans (and a note's passages), Alfred's subtitle a cut.
    found = daemon.ask("search", query="vacuum analyze", format="json")["result"]
    hit = next(h for h in found["hits"] if h["note_id"] == "notes:db/postgres-vacuum.md")
    assert [hit["passage"][s:e] for s, e in hit["spans"]] == ["VACUUM", "ANALYZE"]
    assert hit["passages"][0]["spans"] == hit["spans"]


def test_mcp_cuts_text_to_one_line_around_the_first_match_and_moves_the_spans():
    from notewell.agents.tools import cut

    text = "Intro  words\n\nthen " + "x " * 60 + "the vacuum word " + "y " * 100
    at = text.index("vacuum")
    short, spans = cut(text, [[at, at + 6], [len(text) - 2, len(text) - 1]], 80)
    assert len(short) <= 80 and short.startswith("…x x") and short.endswith("…")
    assert [short[a:b] for a, b in spans] == ["vacuum"]  # the one cut off is dropped
    assert cut("a  b\tvacuum", [[5, 11]], 240, around=False) == ("a b vacuum", [[4, 10]])


def test_the_writer_thread_writes_a_jobs_pages_after_the_answer(home):
    from notewell.launcher import quicklook

    job = quicklook.writer().job([alfred_hit(passage="thread vacuum", spans=[(7, 13)])])
    (path,) = job.paths
    assert not os.path.exists(path)  # naming a page writes nothing
    quicklook.writer().submit(job)
    quicklook.writer().flush()
    assert "<mark>vacuum</mark>" in Path(path).read_text(encoding="utf-8")


def test_while_the_folder_cannot_be_made_answers_name_no_pages(home):
    from notewell.launcher import quicklook
    from notewell.wire import paths

    os.makedirs(paths.cache_dir(), exist_ok=True)
    open(paths.preview_dir(), "w").close()  # a file where the folder should be
    w = quicklook.Writer()
    w.submit(w.job([alfred_hit()]))
    w.flush()
    assert not w.usable and w.job([alfred_hit()]).paths == [None]
    os.remove(paths.preview_dir())
    w.submit(w.job([alfred_hit()]))  # a job still goes to the writer, which tries again
    w.flush()
    assert w.usable and w.job([alfred_hit()]).paths[0] is not None


def test_the_writer_skips_answers_a_newer_one_replaced(home, monkeypatch):
    from notewell.launcher import quicklook

    busy, release = threading.Event(), threading.Event()
    w = quicklook.Writer()
    real_write = w.write

    def slow_write(job, before_page=None):
        busy.set()
        release.wait(10)
        return real_write(job, before_page)

    monkeypatch.setattr(w, "write", slow_write)
    first, replaced, newest = (w.job([alfred_hit(passage=f"typed {i}")]) for i in range(3))
    w.submit(first)
    assert busy.wait(10)  # the writer is on the first answer
    w.submit(replaced)
    w.submit(newest)
    release.set()
    w.flush()
    assert os.path.exists(first.paths[0]) and os.path.exists(newest.paths[0])
    assert not os.path.exists(replaced.paths[0])


def test_the_writer_keeps_the_folder_bounded_listing_it_once(home, monkeypatch):
    from notewell.launcher import quicklook
    from notewell.wire import paths

    listed = []
    real_listed = quicklook._listed
    monkeypatch.setattr(quicklook, "_listed", lambda f: listed.append(f) or real_listed(f))
    w = quicklook.Writer()
    for a in range(15):  # twenty new pages an answer, 300 in all
        w.submit(w.job([alfred_hit(passage=f"answer {a} hit {i}") for i in range(20)]))
        w.flush()
        assert len(os.listdir(paths.preview_dir())) <= quicklook.MAX_PREVIEWS
    assert len(os.listdir(paths.preview_dir())) >= quicklook.MAX_PREVIEWS - 50
    assert len(listed) == 1  # at its first job; it keeps count itself since


def test_pages_wait_while_the_daemon_answers_a_read(home, monkeypatch):
    from notewell.launcher import quicklook

    w = quicklook.Writer()
    seen, answering = [], [False]
    real_write = w.write

    def watched(job, before_page=None):
        def check() -> None:
            before_page()
            seen.append(answering[0])  # whether a read was being answered
        return real_write(job, check)

    monkeypatch.setattr(w, "write", watched)
    job = w.job([alfred_hit(passage="answered first")])
    with w.answering():
        answering[0] = True
        w.submit(job)
        assert not os.path.exists(job.paths[0])
        answering[0] = False
    w.flush()
    assert seen == [False] and os.path.exists(job.paths[0])


def test_a_searchs_pages_are_written_only_once_its_reply_is_sent(tmp_path, home, notes_dir):
    from helpers import stepped_background
    from notewell.launcher import quicklook
    from notewell.serve.handlers import Handlers
    from notewell.serve.transport import REPLIED
    from notewell.wire import protocol
    from reliability_helpers import FakeClock

    sent = []

    def send(reply: dict) -> None:  # the connection's: the reply leaves now
        items = json.loads(reply["result"]["alfred"])["items"]
        pages = [i["quicklookurl"] for i in items if "quicklookurl" in i]
        sent.append([(p, os.path.exists(p)) for p in pages])

    with stepped_background(tmp_path, notes_dir, FakeClock()) as bg:
        handlers = Handlers(bg.engine.config, bg, request_stop=lambda: None)
        req = protocol.request("search", query="vacuum analyze", format="alfred")
        assert handlers.answer(req, send) is REPLIED
        quicklook.writer().flush()
        handlers.shutdown()
    (pages,) = sent
    assert pages and not any(there for _, there in pages)
    assert all(os.path.exists(p) for p, _ in pages)


def test_a_page_cut_short_by_a_failed_write_is_not_left(home, monkeypatch):
    from notewell.launcher import quicklook

    w = quicklook.Writer()
    job = w.job([alfred_hit(passage="disk full")])
    quicklook.ready(job.folder)

    def full(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(quicklook.os, "write", full)
    assert w.write(job) == 0 and not os.path.exists(job.paths[0])
    monkeypatch.undo()
    assert w.write(job) == 1 and os.path.exists(job.paths[0])
