"""`notewell eval --self`: known-item queries from the user's own notes (which heading or
sentence, the same every time), a corpus that holds neither the queries nor any title,
models side by side, its errors and JSON (fake embedders); and on the real collections
when ../shared is present."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from helpers import REPO, SHARED, write_notes
from notewell import cli, config
from notewell.evaluation import known_items, self_eval
from notewell.evaluation.corpora import eval_index, folder_source
from notewell.evaluation.metrics import EvalError, load_golden
from notewell.model.fake import FakeEmbedder
from notewell.model.files import ModelError

SYLLABLES = ["ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "ze", "bo", "di"]


def word(n: int) -> str:
    """A made-up word per number, so every note has words of its own."""
    out = ""
    for _ in range(3):
        out += SYLLABLES[n % len(SYLLABLES)]
        n //= len(SYLLABLES)
    return out + "x"


def note_text(i: int) -> str:
    w = [word(100 * i + j) for j in range(40)]
    filler = " ".join(w[10:38]) + "."
    parts = [f"# Title {w[0]} {w[1]}", "",
             f"`{w[2]}` is not {w[3]} code in a sentence of {w[4]} words.",
             f"The {w[5]} keeps {w[6]} beside the {w[7]} in {w[8]} weather.",
             f"Read https://example.com/{w[9]} about it, said the {w[9]} {w[10]}.", "",
             "```sh", f"run {w[11]} with {w[12]} and {w[13]} flags on",
             "```", "", f"Lowercase {filler}"]
    if i % 3 == 0:  # a heading to ask for
        parts += ["", f"## Sharpen {w[30]} {w[31]} daily", "", f"The {w[32]} and {w[33]} "
                  f"are {w[34]} {w[35]} {w[36]} {w[37]} all along the way."]
    return "\n".join(parts) + "\n"


def make_notes(root: Path, count: int = 30, tiny: int = 3) -> Path:
    notes = {f"topic{i % 4}/note-{i}.md": note_text(i) for i in range(count)}
    for i in range(tiny):  # too short to hold a query and be found without it
        notes[f"tiny-{i}.md"] = f"# Tiny {word(9000 + i)}\n\nThe {word(9100 + i)} is small.\n"
    return write_notes(root, notes)


def picked(root: Path, count: int = 200, seed: str = known_items.SEED):
    notes = known_items.read_notes([folder_source(str(root))])
    return notes, known_items.pick(notes, count, seed)


# -- which queries ---------------------------------------------------------------------------


def test_queries_are_the_same_every_time_and_skip_titles_code_links_and_short_notes(tmp_path):
    root = make_notes(tmp_path / "notes")
    notes, known = picked(root)
    again = known_items.pick(list(reversed(notes)), 200)
    assert [(k.note_id, k.text) for k in again.items] == [
        (k.note_id, k.text) for k in known.items]
    assert len(known.items) == 30  # every note but the tiny ones, one query each
    assert not any(k.note_id.startswith("notes:tiny-") for k in known.items)
    texts = {n.note_id: n.text for n in notes}
    titles = {n.title.lower() for n in notes}
    for k in known.items:
        i = int(k.note_id.rsplit("-", 1)[1].removesuffix(".md"))
        w = [word(100 * i + j) for j in range(40)]
        assert k.text.lower() not in titles and w[0] not in k.text
        if i % 3 == 0:  # the heading below the title, never the title
            assert (k.type, k.text) == ("heading", f"Sharpen {w[30]} {w[31]} daily")
        else:  # the first sentence that fits: not the one with code, nor the URL's
            assert (k.type, k.text) == ("sentence",
                                        f"The {w[5]} keeps {w[6]} beside the {w[7]} in "
                                        f"{w[8]} weather.")
        assert k.text in texts[k.note_id]
    # Titles only when asked for (--kinds title): the title, never in the corpus.
    titled = known_items.pick(notes, 200, kinds=("title",))
    assert [(k.type, k.text) for k in titled.items] == [
        ("title", next(n.title for n in notes if n.note_id == k.note_id))
        for k in titled.items]
    assert {k.note_id for k in titled.items} == {k.note_id for k in known.items}
    # A smaller sample is the start of the larger one; another seed draws other notes.
    assert [k.note_id for k in known_items.pick(notes, 7).items] == [
        k.note_id for k in known.items[:7]]
    other = known_items.pick(notes, 7, seed="another").items
    assert [k.note_id for k in other] != [k.note_id for k in known.items[:7]]


def test_a_sentence_found_in_another_note_too_is_not_asked_for(tmp_path):
    root = make_notes(tmp_path / "notes", count=24)
    shared = note_text(1).splitlines()[3]  # note 1's lead sentence, copied into note 2
    path = root / "topic2" / "note-2.md"
    path.write_text(path.read_text() + "\n" + shared + "\n")
    _, known = picked(root)
    assert shared not in {k.text for k in known.items}
    assert "notes:topic1/note-1.md" not in {k.note_id for k in known.items}


def test_too_few_notes_is_an_error_that_says_what_to_do(tmp_path):
    root = make_notes(tmp_path / "notes", count=8)
    with pytest.raises(EvalError, match=r"at least 20 notes .* found 8.*--notes DIR"):
        picked(root)
    # enough notes, but none with anything to ask for
    notes = {f"n{i}.md": f"# {word(i)}\n\n" + " ".join(word(50 * i + j) for j in range(30))
             for i in range(25)}
    with pytest.raises(EvalError, match="only 0 of 25 notes hold a heading or a sentence"):
        picked(write_notes(tmp_path / "flat", notes))


# -- the corpus ------------------------------------------------------------------------------


def phrase_hits(index, text: str) -> set[str]:
    """The notes whose title, aliases, headings, text or tags hold ``text`` as a phrase
    (FTS5), by note id."""
    terms = " ".join(text.replace('"', " ").split())
    chunks = [c for c, _ in index.reads.fts5_bm25(f'"{terms}"', 1000)]
    rows = {n for _, n, _ in index.reads.owners(chunks)}
    return {note_id for note_id, row in _note_rows(index).items() if row in rows}


def _note_rows(index) -> dict[str, int]:
    return {note_id: index.reads.note_row(note_id) for note_id in index.reads.note_paths()}


def test_the_corpus_holds_no_query_and_no_title_and_every_note_stays(home, tmp_path):
    root = make_notes(tmp_path / "notes")
    notes, known = picked(root)
    index = eval_index(known_items.NotesSource("self", known.corpus), FakeEmbedder(), "t")
    try:
        assert set(index.reads.note_paths()) == {n.note_id for n in notes}
        for k in known.items:
            assert k.note_id not in phrase_hits(index, k.text), k
            # The rest of the note is still there to be found by.
            i = int(k.note_id.rsplit("-", 1)[1].removesuffix(".md"))
            assert phrase_hits(index, word(100 * i + 20)) == {k.note_id}
        for n in notes:  # neither its title (nor its first H1) nor its path's words
            assert phrase_hits(index, n.title) == set(), n.title
            assert phrase_hits(index, Path(n.path).stem) == set()
        # Before the cut, the same search finds the note: the check can fail.
        whole = known_items.NotesSource("whole", [known_items._with_text(n, n.text)
                                                  for n in notes])
        before = eval_index(whole, FakeEmbedder(), "whole")
        try:
            assert known.items[0].note_id in phrase_hits(before, known.items[0].text)
        finally:
            before.close()
    finally:
        index.close()


# -- the command -----------------------------------------------------------------------------


def run(*args: str, embedder=FakeEmbedder) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(["eval", "--self", *args], embedder=embedder)
    return code, out.getvalue(), err.getvalue()


def test_two_models_side_by_side_each_with_its_own_kept_index(home, tmp_path, monkeypatch):
    from notewell.model import runtime

    monkeypatch.setattr(runtime, "default_embedder", lambda: FakeEmbedder(dim=16))
    root = make_notes(tmp_path / "notes")
    code, out, err = run("--notes", str(root), "--models", "current,shipped")
    assert code == 0, err
    lines = out.splitlines()
    assert "30 known-item queries (10 headings, 20 sentences) over 33 notes" in lines[1]
    header = lines.index("all (30):") + 1
    assert lines[header].split() == ["ranker", "current", "shipped"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[header + 1:header + 4]}
    assert list(rows) == ["notewell", "dense", "bm25"]
    for cells in rows.values():  # "R@5 / MRR" per model
        assert len(cells) == 6 and cells[1] == cells[4] == "/"
        assert all(0.0 <= float(c) <= 1.0 for c in cells[::3] + cells[2::3])
    assert rows["dense"][0] != rows["dense"][3]  # two models, two answers
    assert "heading (10):" in lines and "sentence (20):" in lines
    assert "embedding" in err or "indexing self" in err  # progress on stderr
    assert len(os.listdir(home / "eval")) == 2  # one index per model, same corpus

    # Kept: a second run embeds no passage; a larger sample only those of the notes it
    # cuts. (Each run embeds its queries.)
    record = tmp_path / "embedded.txt"
    recording = FakeEmbedder(dim=32, record=str(record))  # a model of its own

    def passages(count: str) -> set[str]:
        before = set(record.read_text().split()) if record.exists() else set()
        code, _, err = run("--notes", str(root), "--queries", count,
                           embedder=lambda: recording)
        assert code == 0, err
        queries = {hashlib.sha256(k.text.encode()).hexdigest()
                   for k in picked(root, int(count))[1].items}
        return set(record.read_text().split()) - before - queries

    assert len(passages("5")) >= 33  # every note, a passage or more each
    assert passages("5") == set()
    more = passages("10")
    assert 5 <= len(more) <= 10  # the five newly cut notes' passages


def test_json_shape_and_the_configured_sources(home, tmp_path):
    root = make_notes(tmp_path / "notes")
    config.save(config.Config(sources=(config.SourceConfig("mine", "markdown", str(root)),)))
    code, out, err = run("--json", "--queries", "12", "--methods", "bm25,keyword")
    assert code == 0, err
    doc = json.loads(out)
    assert list(doc) == ["queries", "notes", "types", "models"]
    assert doc["queries"] == 12 and doc["notes"] == 33
    assert sum(doc["types"].values()) == 12
    assert list(doc["models"]) == ["current"]
    model = doc["models"]["current"]
    assert model["model"] == "fake-hash" and list(model["methods"]) == ["bm25", "keyword"]
    for groups in model["methods"].values():
        assert set(groups) == {"all", *doc["types"]}
        assert set(groups["all"]) == {"ndcg@10", "recall@5", "recall@10", "mrr@10"}
    # the fake model and BM25 find the made-up words of these notes
    assert model["methods"]["bm25"]["all"]["recall@5"] > 0.5


def test_command_errors_say_what_to_do(home, tmp_path):
    code, _, err = run("--notes", str(make_notes(tmp_path / "few", count=5)))
    assert code == 1 and "at least 20 notes" in err
    code, _, err = run("--notes", str(tmp_path / "nowhere"))
    assert code == 1 and "not a folder of Markdown notes" in err
    code, _, err = run("--notes", str(make_notes(tmp_path / "n")), "--models", "current,nope")
    assert code == 1 and "'nope' is not a model folder" in err
    (tmp_path / "empty-model").mkdir()
    code, out, err = run("--notes", str(tmp_path / "n"), "--models",
                         f"current,{tmp_path / 'empty-model'}")
    assert code == 1 and "model.onnx" in err and not out  # before any model ran
    config.save(config.Config(sources=()))
    code, _, err = run()
    assert code == 1 and "no sources" in err and "--notes DIR" in err
    code, _, err = run("--queries", "0")
    assert code == 2 and "--queries" in err
    code, _, err = run("--kinds", "title,magic")
    assert code == 2 and "--kinds from title, heading, sentence" in err
    code = cli.main(["eval", "--models", "shipped"], embedder=FakeEmbedder)
    assert code == 2  # without --self it would be ignored


def test_model_names_resolve_in_one_place(tmp_path):
    from notewell.model import runtime

    current = FakeEmbedder
    assert self_eval.model_for("current", current) is current
    assert self_eval.model_for("shipped", current) is runtime.default_embedder
    with pytest.raises(ModelError, match=r"model\.onnx"):  # a folder: checked at once
        self_eval.model_for(str(tmp_path), current)


# -- the real collections ------------------------------------------------------------------

SETS = ("til-jbranchaud", "dendron-vault")


def shared_notes(name: str) -> Path:
    # NOTEWELL_BENCH_DATA as the benchmarks read it: indexes are keyed by the folder's path.
    root = Path(os.environ.get("NOTEWELL_BENCH_DATA") or SHARED) / name / "notes"
    if not root.is_dir():
        pytest.skip(f"no {root}")
    return root


@pytest.mark.parametrize("name", SETS)
def test_real_collections_give_200_queries_none_a_title(name):
    notes, known = picked(shared_notes(name))
    assert len(known.items) == 200
    titles = {n.title.strip().lower() for n in notes}
    assert not any(k.text.lower() in titles for k in known.items)
    assert not any("`" in k.text or "://" in k.text for k in known.items)


@pytest.mark.real_corpus
@pytest.mark.parametrize("name", SETS)
def test_self_eval_orders_models_and_rankers_as_the_golden_set_does(name, real_embedder,
                                                                    tmp_path, monkeypatch):
    """The validation of docs/search-quality.md ("Measuring on your own notes"): the shipped
    model against the fake one, and the rankers, by both measures. Indexes are kept in
    $NOTEWELL_EVAL_HOME when set (else embedding takes minutes per collection)."""
    from notewell.evaluation import runner as evaluate

    root = shared_notes(name)
    monkeypatch.setenv("NOTEWELL_HOME", os.environ.get("NOTEWELL_EVAL_HOME", str(tmp_path)))
    methods = ("notewell", "dense", "bm25", "keyword")
    models = {"shipped": lambda: real_embedder, "fake": FakeEmbedder}
    golden_set = str(REPO / "bench" / "golden" / f"{name}.jsonl")
    golden = {label: evaluate.run_folder_golden(golden_set, str(root), make(), methods)
              for label, make in models.items()}
    source = folder_source(str(root))
    ours = self_eval.run_self(known_items.read_notes([source]), list(models.items()),
                              self_eval.corpus_key([source.config]), 200, methods).models

    def systems(results: dict) -> dict[str, dict[str, float]]:
        out = {f"{label} {m}": results[label][m]["all"] for label in models
               for m in ("notewell", "dense")}
        return {**out, "bm25": results["shipped"]["bm25"]["all"],
                "keyword": results["shipped"]["keyword"]["all"]}

    g = systems(golden)
    s = systems({label: res for label, (_, res) in ours.items()})
    noise = {"golden": 1 / len(load_golden(golden_set)) ** 0.5, "self": 1 / 200 ** 0.5}
    for metric in ("recall@5", "mrr@10"):
        for ranker in ("notewell", "dense"):  # the models' order, clear on both sides
            a, b = f"shipped {ranker}", f"fake {ranker}"
            assert g[a][metric] - g[b][metric] > noise["golden"], (metric, a)
            assert s[a][metric] - s[b][metric] > noise["self"], (metric, a)
        for a, b in itertools.combinations(g, 2):  # no pair clear on both sides flips
            dg, ds = g[a][metric] - g[b][metric], s[a][metric] - s[b][metric]
            if abs(dg) > noise["golden"] and abs(ds) > noise["self"]:
                assert dg * ds > 0, (metric, a, b, dg, ds)
