"""The model file that runs: the shipped int8 model rewritten to keep its weights int8 gives
the shipped file's vectors, is built once and chosen by comparing vectors (never by timing),
and any failure on the way leaves the shipped file in use."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from notewell.model import rewrite, runtime
from notewell.model.embedding import OnnxEmbedder
from notewell.model.files import MODEL_SHA256, ModelFiles, locate_model_files
from notewell.model.runtime import default_embedder
from notewell.ops import doctor

TEXTS = [
    "undo a commit",
    "Postgres vacuum > Why\nRun VACUUM ANALYZE after a bulk delete so the planner "
    "statistics stay fresh. " * 5,
    "tram in lisbon",
]


@pytest.fixture(scope="module")
def shipped() -> ModelFiles:
    return locate_model_files()


@pytest.fixture
def model_dir(tmp_path, monkeypatch) -> str:
    """A fresh model folder."""
    path = str(tmp_path / "models")
    monkeypatch.setenv("NOTEWELL_MODEL_DIR", path)
    return path


def choose(files: ModelFiles, directory: str | None = None) -> str:
    return runtime.runtime_model(files.model, files.tokenizer, MODEL_SHA256, directory)


def test_the_rewrite_gives_the_shipped_files_vectors_with_int8_weights(shipped, tmp_path):
    import onnx

    dest = str(tmp_path / "rewrite.onnx")
    rewrite.rewrite(shipped.model, dest)
    graph = onnx.load(dest).graph
    ops = [n.op_type for n in graph.node]
    assert ops.count("MatMulNBits") == 36
    # Each layer's attention and GELU as one operator each, nothing of them left spelled out.
    assert ops.count("MultiHeadAttention") == 6 and ops.count("BiasGelu") == 6
    assert not {"MatMul", "Softmax", "Erf", "Transpose", "IsNaN"} & set(ops)
    assert len(ops) < 130  # 385 in the shipped file, 261 with only the weights rewritten
    float_weights = [i for i in graph.initializer if i.data_type == onnx.TensorProto.FLOAT
                     and np.prod(i.dims) > 100_000]
    assert float_weights == []  # no weight matrix or embedding table left in float
    # One padded batch (the texts differ in length) and each text alone: the padding mask
    # reaches the fused attention.
    base = OnnxEmbedder(shipped).embed_batch(TEXTS)
    rewritten = OnnxEmbedder(ModelFiles(dest, shipped.tokenizer))
    assert (base * rewritten.embed_batch(TEXTS)).sum(axis=1).min() >= 0.999
    alone = np.concatenate([rewritten.embed_batch([t]) for t in TEXTS])
    assert (base * alone).sum(axis=1).min() >= 0.999


def test_fusing_leaves_what_it_does_not_recognise(shipped, tmp_path):
    import onnx

    dest = str(tmp_path / "rewrite.onnx")
    rewrite.rewrite(shipped.model, dest)
    model = onnx.load(dest)
    before = [n.op_type for n in model.graph.node]
    assert rewrite.fuse_attention(model.graph) == 0  # already fused: nothing matches
    assert rewrite.fuse_gelu(model.graph) == 0
    assert [n.op_type for n in model.graph.node] == before


def test_the_choice_is_made_once_and_recorded(shipped, model_dir):
    path = choose(shipped)
    assert path.startswith(model_dir) and path.endswith(".onnx")
    record = runtime.recorded_choice(MODEL_SHA256)
    assert record["use"] == "rewrite" and record["min_cosine"] >= runtime.MIN_COSINE
    assert "query_ms" not in record  # decided by its vectors alone, never by a timing
    built = os.stat(path).st_mtime_ns
    assert choose(shipped) == path
    assert os.stat(path).st_mtime_ns == built  # read from the record, not rebuilt
    # The default embedder runs it, under the same fingerprint as the shipped file.
    embedder = default_embedder()
    assert embedder.files.model == path
    assert embedder.fingerprint() == OnnxEmbedder(shipped).fingerprint()


def test_a_new_onnxruntime_makes_the_choice_again(shipped, model_dir):
    choose(shipped)
    _, record = runtime.choice_files(MODEL_SHA256, None)
    with open(record) as f:
        data = json.load(f)
    data["onnxruntime"] = "0.0.1"
    data["use"] = "shipped"
    with open(record, "w") as f:
        json.dump(data, f)
    assert choose(shipped) != shipped.model
    assert runtime.recorded_choice(MODEL_SHA256)["use"] == "rewrite"


def test_a_choice_made_by_timing_is_made_again_by_the_vectors(shipped, model_dir):
    """An older notewell also timed both files and could record "slower on this machine";
    that verdict is not kept: the rule that made it is gone."""
    choose(shipped)
    _, record = runtime.choice_files(MODEL_SHA256, None)
    with open(record) as f:
        data = json.load(f)
    data.pop("rule")
    data.update(use="shipped", why="slower on this machine",
                query_ms={"shipped": 2.0, "rewrite": 3.0})
    with open(record, "w") as f:
        json.dump(data, f)
    assert choose(shipped) != shipped.model
    assert runtime.recorded_choice(MODEL_SHA256)["use"] == "rewrite"


def test_a_new_revision_replaces_the_older_rewrite(shipped, model_dir, monkeypatch):
    older = choose(shipped)
    other = os.path.join(model_dir, "minilm-0123456789abcdef-r1-b32.onnx")  # another file's
    open(other, "wb").close()
    monkeypatch.setattr(runtime, "REVISION", runtime.REVISION + 1)
    newer = choose(shipped)
    assert newer != older and os.path.exists(newer)
    assert sorted(os.listdir(model_dir)) == sorted(
        [os.path.basename(newer), os.path.basename(newer)[:-5] + ".json",
         os.path.basename(other)])


def test_without_the_onnx_package_the_shipped_file_runs(shipped, model_dir, monkeypatch):
    def no_onnx(source, dest, block=rewrite.BLOCK):
        raise ImportError("No module named 'onnx'")

    monkeypatch.setattr(runtime, "rewrite", no_onnx)
    assert choose(shipped) == shipped.model
    assert "onnx package" in runtime.recorded_choice(MODEL_SHA256)["why"]
    check = doctor.check_model_rewrite()
    assert check.status == doctor.WARN and "make install" in check.fix


def test_a_rewrite_that_disagrees_is_not_used(shipped, model_dir, monkeypatch):
    monkeypatch.setattr(runtime, "MIN_COSINE", 1.01)
    assert choose(shipped) == shipped.model
    assert "vectors differ" in runtime.recorded_choice(MODEL_SHA256)["why"]
    check = doctor.check_model_rewrite()
    assert check.status == doctor.WARN and "vectors differ" in check.detail


def test_a_changed_rewrite_file_is_not_run(shipped, model_dir):
    path = choose(shipped)
    with open(path, "r+b") as f:
        f.seek(1000)
        f.write(b"\0" * 16)
    assert choose(shipped) == shipped.model


def test_an_unexpected_model_file_is_refused(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    source = str(tmp_path / "tiny.onnx")
    onnx.save(helper.make_model(graph), source)
    with pytest.raises(ValueError, match="no int8 weights"):
        rewrite.rewrite(source, str(tmp_path / "out.onnx"))
    assert not os.path.exists(tmp_path / "out.onnx")


def test_doctor_names_the_rewrite_and_why(shipped, model_dir):
    check = doctor.check_model_rewrite()
    assert check.status == doctor.OK and "int8" in check.detail and "cosine" in check.detail
    assert runtime.choice_files(MODEL_SHA256, None)[0] in check.detail
