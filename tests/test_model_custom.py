"""A model of the user's own through ``[model]`` in config.toml, with nothing downloaded:
the shipped files through a folder, and a tiny model written here with ``onnx.helper``
(32 dimensions, CLS pooling, prefixes) that indexes, searches and rebuilds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import write_notes, write_word_tokenizer
from notewell import cli, config
from notewell.engine import Engine, chunker_for, embedder_for
from notewell.index import store
from notewell.index.schema import IndexMismatch, describe
from notewell.ingest.chunking import ChunkSettings
from notewell.model.custom import open_folder
from notewell.model.embedding import embed_queries
from notewell.model.fake import FakeEmbedder
from notewell.model.files import ModelError, locate_model_files
from notewell.model.runtime import custom_embedder
from notewell.ops import doctor

TINY_NOTES = {
    "bread.md": "# Banana bread\n\nThree ripe bananas, flour, sugar and butter. Bake an hour.\n",
    "git.md": "# Undo a commit\n\nReset soft to undo the last commit and keep changes.\n",
    "trip.md": "# Lisbon weekend\n\nTram rides, pastries and sunset views over the river.\n",
}
WORDS = sorted({w.strip(".,:#").lower() for text in TINY_NOTES.values() for w in text.split()}
               | {"query", "passage", ":", "notewell"})


def tiny_model(folder: Path, dim: int = 32, output: str = "last_hidden_state",
               seed: int = 7, pooled: bool = False, symbolic_dim: bool = False) -> Path:
    """A BERT-shaped toy: token vectors plus the sequence's masked mean, through one dense
    layer and tanh (so the first token's vector depends on the whole text), and a
    word-level tokenizer.json that adds [CLS] and [SEP]. No token_type_ids input."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for w in WORDS:
        vocab.setdefault(w, len(vocab))
    write_word_tokenizer(folder, vocab)

    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(len(vocab), dim)).astype(np.float32)
    emb[:4] *= 0.05  # special tokens: the first token's vector is mostly its context
    weight = (rng.normal(size=(dim, dim)) / np.sqrt(dim)).astype(np.float32)
    inits = [numpy_helper.from_array(emb, "emb"), numpy_helper.from_array(weight, "w"),
             numpy_helper.from_array(np.array([2], np.int64), "axis2"),
             numpy_helper.from_array(np.array([1], np.int64), "axis1")]
    nodes = [
        helper.make_node("Gather", ["emb", "input_ids"], ["tokens"], axis=0),
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["maskf", "axis2"], ["mask3"]),
        helper.make_node("Mul", ["tokens", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis1"], ["summed"], keepdims=1),
        helper.make_node("ReduceSum", ["mask3", "axis1"], ["count"], keepdims=1),
        helper.make_node("Div", ["summed", "count"], ["context"]),
        helper.make_node("Add", ["tokens", "context"], ["mixed"]),
        helper.make_node("MatMul", ["mixed", "w"], ["dense"]),
        helper.make_node("Tanh", ["dense"], ["hidden" if pooled else output]),
    ]
    if pooled:  # an export with the pooling inside: one vector per text
        nodes.append(helper.make_node("ReduceMean", ["hidden"], [output], axes=[1],
                                      keepdims=0))
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                       ["batch", "sequence"])],
        [helper.make_tensor_value_info(
            output, TensorProto.FLOAT,
            ["batch"] + ([] if pooled else ["sequence"]) + ["width" if symbolic_dim else dim])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "model.onnx"))
    return folder


def write_config(home: Path, notes: Path, model: dict | None) -> config.Config:
    lines = []
    if model is not None:
        lines.append("[model]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in model.items()]
    lines += ["[[sources]]", 'name = "notes"', 'type = "markdown"',
              f"path = {json.dumps(str(notes))}"]
    (home / "config.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return config.load()


def test_the_shipped_model_through_a_model_folder_gives_the_same_vectors(
        tmp_path, home, real_embedder):
    files = locate_model_files()
    folder = tmp_path / "minilm"
    folder.mkdir()
    shutil.copy(files.model, folder / "model.onnx")
    shutil.copy(files.tokenizer, folder / "tokenizer.json")
    cfg = write_config(home, tmp_path, {"path": str(folder)})
    mine = embedder_for(cfg)
    texts = ["postgres vacuum", "Banana bread > Ingredients\nThree ripe bananas, flour."]
    assert mine.dim == real_embedder.dim == 384
    # Same files, same settings: the same fingerprint, so switching re-embeds nothing.
    assert mine.fingerprint() == real_embedder.fingerprint()
    np.testing.assert_allclose(mine.embed_batch(texts), real_embedder.embed_batch(texts),
                               atol=1e-6)
    np.testing.assert_allclose(embed_queries(mine, texts[:1]),
                               real_embedder.embed_batch(texts[:1]), atol=1e-6)
    # The same files with another setting are another model; ``normalize`` changes no
    # stored vector (they are unit length either way), so it is not another model.
    other = open_folder(str(folder), max_tokens=128)
    assert other.fingerprint() != mine.fingerprint()
    assert open_folder(str(folder), normalize=False).fingerprint() == mine.fingerprint()


def test_a_tiny_model_with_cls_pooling_and_prefixes(tmp_path, home):
    folder = tiny_model(tmp_path / "tiny")
    cls = custom_embedder(open_folder(str(folder), pooling="cls", query_prefix="query: ",
                                      passage_prefix="passage: "))
    plain_cls = custom_embedder(open_folder(str(folder), pooling="cls"))
    mean = custom_embedder(open_folder(str(folder), pooling="mean"))
    assert cls.dim == 32 and cls.inputs == ["input_ids", "attention_mask"]
    text = ["ripe bananas and flour"]
    # The prefixes are what the model reads before a query and before a passage.
    np.testing.assert_allclose(cls.embed_queries(text),
                               plain_cls.embed_batch(["query: " + text[0]]), atol=1e-6)
    np.testing.assert_allclose(cls.embed_batch(text),
                               plain_cls.embed_batch(["passage: " + text[0]]), atol=1e-6)
    assert not np.allclose(cls.embed_queries(text), cls.embed_batch(text))
    # CLS pooling reads the first token's vector, not the mean.
    assert not np.allclose(plain_cls.embed_batch(text), mean.embed_batch(text))
    v = plain_cls.embed_batch(text)
    assert v.shape == (1, 32) and abs(float(np.linalg.norm(v)) - 1) < 1e-5
    fingerprints = {e.fingerprint() for e in (cls, plain_cls, mean)}
    assert len(fingerprints) == 3 and all("onnx:" in f for f in fingerprints)


def test_pooled_outputs_and_a_dimension_only_a_run_tells(tmp_path, home):
    pooled = custom_embedder(open_folder(str(tiny_model(
        tmp_path / "pooled", dim=24, output="sentence_embedding", pooled=True))))
    assert pooled.output == "sentence_embedding" and pooled.dim == 24
    assert pooled.embed_batch(["ripe bananas", "undo commit"]).shape == (2, 24)
    symbolic = custom_embedder(open_folder(str(tiny_model(
        tmp_path / "symbolic", dim=20, symbolic_dim=True))))
    assert symbolic.dim == 20 and symbolic.embed_queries(["lisbon"]).shape == (1, 20)


def test_a_tiny_model_indexes_searches_and_switching_back_reembeds_nothing(tmp_path, home):
    notes = write_notes(tmp_path / "notes", TINY_NOTES)
    folder = tiny_model(tmp_path / "tiny")
    model = {"path": str(folder), "pooling": "cls", "max_tokens": 64,
             "query_prefix": "query: ", "passage_prefix": "passage: "}
    cfg = write_config(home, notes, model)
    engine = Engine(cfg)
    assert engine.embedder.dim == 32
    assert engine.chunker == ChunkSettings.for_tokens(64) != ChunkSettings()
    (report,) = engine.sync()
    assert report.added == 3 and report.embedded >= 3
    with engine.reading() as view:
        hits = view.search("ripe bananas flour", mode="dense").hits
    assert hits[0].title == "Banana bread"
    with engine.reading() as view:
        assert view.search("lisbon", mode="bm25").hits[0].title == "Lisbon weekend"
        dense_before = [(h.title, round(h.score, 5)) for h in
                        view.search("undo the last commit", mode="dense").hits]
    meta = describe(engine.index.path).meta
    assert meta["dim"] == "32" and meta["embedder"] == engine.embedder.fingerprint()
    engine.close()

    # Another model: reported clearly, and a rebuild switches.
    fake = FakeEmbedder()
    with pytest.raises(IndexMismatch, match=r"another model.*--rebuild"):
        Engine(cfg, embedder=fake)
    assert cli.main(["index", "--rebuild", "--quiet"], embedder=lambda: fake) == 0
    assert sum(fake.calls) > 0  # the fake model had nothing stored: all embedded
    kept = list((home / "index").glob("vectors-*.sqlite"))
    assert len(kept) == 1  # the tiny model's vectors, kept

    # Back to the tiny model: its vectors come back, nothing is embedded.
    index_dir = str(home / "index")
    from notewell.engine import rebuild
    from notewell.sources import open_source

    tiny = embedder_for(cfg)
    _, reports = rebuild([open_source(s) for s in cfg.sources], tiny, chunker_for(tiny),
                         index_dir)
    assert [r.embedded for r in reports] == [0] and reports[0].reused >= 3
    # The fake model's vectors are kept now; the tiny model's file is gone (in use).
    assert [p.name for p in (home / "index").glob("vectors-*.sqlite")] == [
        Path(store.kept_vectors_path(index_dir, fake.fingerprint())).name]
    again = Engine(cfg)
    with again.reading() as view:
        assert [(h.title, round(h.score, 5)) for h in
                view.search("undo the last commit", mode="dense").hits] == dense_before
        assert view.search("undo commit", mode="bm25").hits[0].title == "Undo a commit"
    again.close()
    fake.calls.clear()
    assert cli.main(["index", "--rebuild", "--quiet"], embedder=lambda: fake) == 0
    assert sum(fake.calls) == 0


@pytest.mark.parametrize("damage, message", [
    ("no tokenizer", "no tokenizer.json"),
    ("no folder", "is not a folder"),
    ("wrong outputs", "last_hidden_state"),
    ("corrupt model", "does not load or run"),
    ("corrupt tokenizer", "does not load or run"),
])
def test_a_broken_model_folder_is_a_clear_error_and_the_index_keeps_serving(
        tmp_path, home, damage, message, capsys):
    notes = write_notes(tmp_path / "notes", TINY_NOTES)
    good = tiny_model(tmp_path / "good")
    cfg = write_config(home, notes, {"path": str(good)})
    engine = Engine(cfg)
    engine.sync()
    before = store.current_path(str(home / "index"))

    bad = tmp_path / "bad"
    if damage == "wrong outputs":
        tiny_model(bad, output="logits")
    elif damage != "no folder":
        shutil.copytree(good, bad)
    if damage == "no tokenizer":
        (bad / "tokenizer.json").unlink()
    elif damage == "corrupt model":
        (bad / "model.onnx").write_bytes(b"\x08\x07not an onnx file" * 50)
    elif damage == "corrupt tokenizer":
        (bad / "tokenizer.json").write_text("{not json", encoding="utf-8")
    broken = write_config(home, notes, {"path": str(bad)})
    with pytest.raises(ModelError, match=message):
        embedder_for(broken)
    assert cli.main(["index", "--rebuild", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert message in err and "\n" in err and "Traceback" not in err
    # Nothing was published; the engine on the good model still answers.
    assert store.current_path(str(home / "index")) == before
    with engine.reading() as view:
        assert view.search("banana").hits[0].title == "Banana bread"
    engine.close()
    (own,) = doctor.check_own_model(broken.model)
    assert own.status == doctor.FAIL and message in own.detail


def test_doctor_checks_the_model_folder(tmp_path, home):
    notes = write_notes(tmp_path / "notes", TINY_NOTES)
    folder = tiny_model(tmp_path / "tiny")
    cfg = write_config(home, notes, {"path": str(folder), "pooling": "cls"})
    checks = {c.name: c for c in doctor.check_own_model(cfg.model)}
    assert checks["own model"].status == doctor.OK
    assert "32 dimensions" in checks["own model"].detail
    assert "cls pooling" in checks["own model"].detail
    # A float model has no int8 weights to keep int8: skipped, with the reason.
    assert "does not apply" in checks["own model in memory"].detail


def test_model_table_is_checked_and_kept_by_dump(tmp_path):
    parsed = config.parse({"model": {"path": "~/m", "pooling": "cls", "max_tokens": 128,
                                     "query_prefix": "query: "}})
    assert parsed.model is not None and parsed.model.pooling == "cls"
    assert parsed.model.path.endswith("/m") and parsed.model.normalize is None
    import tomllib

    again = config.parse(tomllib.loads(config.dump(parsed)))
    assert again.model == parsed.model
    for bad, words in (({"pooling": "max"}, "pooling"), ({"max_tokens": "9"}, "max_tokens"),
                       ({"size": 3}, "unknown"), ({}, "path")):
        raw = {"path": "/m", **bad} if "path" not in words else bad
        with pytest.raises(config.ConfigError, match=words):
            config.parse({"model": raw})


def test_the_chunk_budget_follows_the_models_tokens():
    assert ChunkSettings.for_tokens(256) == ChunkSettings()
    small, large = ChunkSettings.for_tokens(128), ChunkSettings.for_tokens(512)
    assert small.max_pieces == 85 and large.max_pieces == 340
    assert small.min_pieces < small.max_pieces and small.overlap_pieces < 30


def test_a_daemon_keeps_serving_when_the_index_is_rebuilt_with_another_model(tmp_path):
    """`notewell index --rebuild` with a new [model] while the daemon runs the old one: the
    daemon cannot search the new generation, so it keeps its own until restarted."""
    from helpers import stepped_background
    from notewell.engine import rebuild
    from reliability_helpers import FakeClock

    folder = write_notes(tmp_path / "notes", TINY_NOTES)
    tiny = custom_embedder(open_folder(str(tiny_model(tmp_path / "tiny"))))
    with stepped_background(tmp_path, folder, FakeClock()) as bg:
        engine = bg.engine
        before = engine.index.path
        newer, _ = rebuild(engine.sources, tiny, chunker_for(tiny), engine.index_dir)
        assert newer != before
        bg.step()  # finds the newer generation, built with another model
        bg.step()
        assert engine.index.path == before and bg.state == "ready"
        with engine.reading() as view:
            assert view.search("banana").hits[0].title == "Banana bread"
