"""``notewell model list`` and ``notewell model use``: the catalog, downloads from a hub
(here a local HTTP server serving a tiny model written with ``onnx.helper``), resuming,
refusing damaged files and models that fail the functional check, and switching the
config, the index and a running daemon to a model and back, re-embedding nothing."""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import json
import re
import socket
import threading
from pathlib import Path

import numpy as np
import pytest
from helpers import start_daemon, wait_synced, write_notes, write_word_tokenizer
from notewell import cli, config
from notewell.engine import Engine
from notewell.index import store
from notewell.index.schema import describe
from notewell.ingest.progress import Relay
from notewell.model import catalog
from notewell.model.catalog import CATALOG, SHIPPED, CatalogModel, HubFile
from notewell.model.download import DownloadError
from notewell.model.embedding import SHIPPED_FINGERPRINT, OnnxEmbedder
from notewell.model.fake import FakeEmbedder
from notewell.model.files import ModelError
from notewell.ops import checks, models

NOTES = {
    "bread.md": "# Banana bread\n\nThree ripe bananas, flour, sugar and butter. Bake an hour.\n",
    "git.md": "# Undo a commit\n\nReset soft to undo the last commit and keep changes.\n",
    "trip.md": "# Lisbon weekend\n\nTram rides, pastries and sunset views over the river.\n",
}
PROBES = (catalog.PROBE_QUERY, catalog.PROBE_RELEVANT, catalog.PROBE_UNRELATED)
REPO, REVISION = "test/tiny-embed", "0123456789abcdef0123456789abcdef01234567"


def words(*texts: str) -> list[str]:
    return sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})


VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]",
         *words(*PROBES, *NOTES.values(), "query: passage: >")]


def tiny_model(folder: Path, dim: int = 128, constant: bool = False) -> dict[str, bytes]:
    """A bag of words: each known word its own axis (special tokens none), so texts that
    share words are close and texts that share none are orthogonal; ``constant`` gives
    every word the same vector, a model that cannot tell texts apart. Its files' bytes."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {w: i for i, w in enumerate(VOCAB)}
    assert len(vocab) <= dim
    write_word_tokenizer(folder, vocab)
    emb = np.zeros((len(vocab), dim), np.float32)
    for i in range(1, len(vocab)):
        if i not in (2, 3):
            emb[i, 0 if constant else i] = 1.0
    graph = helper.make_graph(
        [helper.make_node("Gather", ["emb", "input_ids"], ["last_hidden_state"], axis=0)],
        "tiny-bow",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       ["batch", "seq", dim])],
        initializer=[numpy_helper.from_array(emb, "emb")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(folder / "model.onnx"))
    return {name: (folder / name).read_bytes() for name in ("model.onnx", "tokenizer.json")}


def entry_for(files: dict[str, bytes], name: str = "tiny", dim: int = 128) -> CatalogModel:
    return CatalogModel(
        name=name, purpose="tests", languages="test words", dim=dim, window=64,
        max_tokens=64, pooling="mean", query_prefix="query: ", passage_prefix="passage: ",
        repo=REPO, revision=REVISION, figures="none",
        files=(HubFile("model.onnx", "onnx/model_quantized.onnx", len(files["model.onnx"])),
               HubFile("tokenizer.json", "tokenizer.json", len(files["tokenizer.json"]))))


class Hub:
    """A hub on 127.0.0.1 serving ``/<repo>/resolve/<revision>/<path>``: with
    ``redirect``, a 302 to ``/cdn/<path>`` carrying the file's size and sha256 as the
    Hugging Face hub does; ``cut`` (path -> bytes) sends only that many bytes of the next
    answer and closes; ``ignore_range`` answers every request with the whole file;
    ``wrong`` (path -> bytes) serves other bytes than those the redirect describes.
    ``sent`` records (path, first byte, bytes sent) per answer."""

    def __init__(self, files: dict[str, bytes], redirect: bool = True) -> None:
        self.files = files
        self.redirect = redirect
        self.cut: dict[str, int] = {}
        self.wrong: dict[str, bytes] = {}
        self.ignore_range = False
        self.sent: list[tuple[str, int, int]] = []
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                hub.answer(self)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def sent_for(self, path: str) -> int:
        return sum(n for p, _, n in self.sent if p == path)

    def answer(self, h: http.server.BaseHTTPRequestHandler) -> None:
        prefix = f"/{REPO}/resolve/{REVISION}/"
        if h.path.startswith(prefix) and self.redirect:
            path = h.path[len(prefix):]
            if path not in self.files:
                h.send_error(404)
                return
            h.send_response(302)
            h.send_header("Location", f"/cdn/{path}")
            h.send_header("X-Linked-Size", str(len(self.files[path])))
            h.send_header("X-Linked-Etag", f'"{hashlib.sha256(self.files[path]).hexdigest()}"')
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        path = h.path[len("/cdn/"):] if h.path.startswith("/cdn/") else h.path[len(prefix):]
        if path not in self.files:
            h.send_error(404)
            return
        data = self.wrong.get(path, self.files[path])
        found = re.match(r"bytes=(\d+)-$", h.headers.get("Range", ""))
        start = int(found.group(1)) if found and not self.ignore_range else 0
        if start >= len(data):  # nothing left to send, as real servers answer it
            h.send_response(416)
            h.send_header("Content-Range", f"bytes */{len(data)}")
            h.send_header("Content-Length", "0")
            h.end_headers()
            self.sent.append((path, start, 0))
            return
        h.send_response(206 if start else 200)
        if start:
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.send_header("Content-Length", str(len(data) - start))
        h.end_headers()
        body = data[start:]
        if path in self.cut:
            body = body[:self.cut.pop(path)]
        h.wfile.write(body)
        h.wfile.flush()
        self.sent.append((path, start, len(body)))
        h.close_connection = True


@pytest.fixture
def tiny(tmp_path):
    made = tiny_model(tmp_path / "built")
    files = {"onnx/model_quantized.onnx": made["model.onnx"],
             "tokenizer.json": made["tokenizer.json"]}
    hub = Hub(files)
    yield hub, entry_for(made)
    hub.close()


def configured(home: Path, tmp_path: Path, model: dict | None = None) -> config.Config:
    notes = write_notes(tmp_path / "notes", NOTES)
    cfg = config.Config(sources=(config.SourceConfig("notes", "markdown", str(notes)),),
                        path=str(home / "config.toml"))
    if model is not None:
        cfg = dataclasses.replace(cfg, model=config.ModelConfig(**model))
    config.save(cfg)
    return config.load()


def snapshot(home: Path) -> tuple:
    """What must not change when a switch is refused: config.toml and the live index."""
    index = Path(store.current_path(str(home / "index")))
    return ((home / "config.toml").read_bytes(), index.name, index.stat().st_mtime_ns,
            describe(str(index)).meta["embedder"])


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# -- the catalog ------------------------------------------------------------------------


def test_model_list_shows_each_model_and_which_is_in_use(home, capsys):
    assert cli.main(["model", "list"]) == 0
    out = capsys.readouterr().out
    assert "all-MiniLM-L6-v2 (in use)" in out
    assert "bge-small-en-v1.5 (not downloaded, 35 MB)" in out
    assert "multilingual-e5-small (not downloaded, 135 MB)" in out
    assert "about 100 languages; 384 dimensions" in out and "51.68" in out
    assert "from: Xenova/multilingual-e5-small@97cb8f96" in out
    assert cli.main(["model", "list", "--json"]) == 0
    found = {m["name"]: m for m in json.loads(capsys.readouterr().out)}
    assert set(found) == set(CATALOG)
    bge, e5 = found["bge-small-en-v1.5"], found["multilingual-e5-small"]
    assert bge["pooling"] == "cls" and bge["query_prefix"].startswith("Represent this")
    assert (e5["query_prefix"], e5["passage_prefix"]) == ("query: ", "passage: ")
    assert not bge["installed"] and found["all-MiniLM-L6-v2"]["in_use"]
    # Every download is over HTTPS from the hub, at a pinned revision.
    for m in CATALOG.values():
        for f in m.files if not m.shipped else ():
            url = m.url(f)
            assert url.startswith(f"https://huggingface.co/{m.repo}/resolve/")
            assert re.search(r"/resolve/[0-9a-f]{40}/", url)


def test_a_download_records_what_arrived_and_is_not_fetched_again(tiny, tmp_path, home):
    hub, entry = tiny
    directory = str(tmp_path / "models")
    folder = catalog.install(entry, directory, hub.url)
    assert folder == catalog.installed("tiny", directory, {"tiny": entry})
    manifest = json.loads((Path(folder) / "manifest.json").read_text())
    for name, path in (("model.onnx", "onnx/model_quantized.onnx"),
                       ("tokenizer.json", "tokenizer.json")):
        want = hashlib.sha256(hub.files[path]).hexdigest()
        assert manifest["files"][name]["sha256"] == want == manifest["files"][name][
            "hub_sha256"]
        assert (Path(folder) / name).read_bytes() == hub.files[path]
    assert manifest["complete"] and manifest["revision"] == REVISION
    assert manifest["check"]["relevant"] > manifest["check"]["unrelated"]
    served = len(hub.sent)
    assert catalog.install(entry, directory, hub.url) == folder
    assert len(hub.sent) == served  # installed: nothing asked of the hub
    # doctor shows where it came from and that the files are the bytes received.
    table = entry.model_config(folder)
    found = {c.name: c for c in checks.check_own_model(table)}
    assert found["downloaded model"].status == checks.OK
    assert REPO in found["downloaded model"].detail
    (Path(folder) / "tokenizer.json").write_text(
        (Path(folder) / "tokenizer.json").read_text().replace("banana", "bananas"))
    found = {c.name: c for c in checks.check_own_model(table)}
    assert found["downloaded model"].status == checks.FAIL
    assert "tokenizer.json changed" in found["downloaded model"].detail


@pytest.mark.parametrize("ignore_range", [False, True])
def test_an_interrupted_download_resumes(tiny, tmp_path, home, ignore_range):
    hub, entry = tiny
    directory = str(tmp_path / "models")
    path = "onnx/model_quantized.onnx"
    size = len(hub.files[path])
    hub.cut[path] = size * 2 // 5
    with pytest.raises(DownloadError, match="run the command again to resume"):
        catalog.install(entry, directory, hub.url)
    part = Path(directory) / "tiny" / "model.onnx.part"
    assert part.stat().st_size == size * 2 // 5
    assert catalog.installed("tiny", directory, {"tiny": entry}) is None
    hub.ignore_range = ignore_range
    folder = catalog.install(entry, directory, hub.url)
    assert (Path(folder) / "model.onnx").read_bytes() == hub.files[path]
    assert not part.exists()
    starts = [start for p, start, _ in hub.sent if p == path]
    if ignore_range:  # a server that ignores Range: the file starts over, cleanly
        assert starts == [0, 0] and hub.sent_for(path) == size + size * 2 // 5
    else:  # the rest only: no byte fetched twice
        assert starts == [0, size * 2 // 5] and hub.sent_for(path) == size
    # the tokenizer, received whole the first time, was not asked for again
    assert [p for p, _, _ in hub.sent].count("tokenizer.json") == 1


def test_ctrl_c_keeps_what_arrived_for_the_next_try(tiny, tmp_path, home):
    hub, entry = tiny

    class Interrupting:
        def advance(self, n: int = 1) -> None:
            raise KeyboardInterrupt

        def close(self) -> None:
            pass

    directory = str(tmp_path / "models")
    with pytest.raises(KeyboardInterrupt):
        catalog.install(entry, directory, hub.url, progress=lambda label, total:
                        Interrupting())
    path = "onnx/model_quantized.onnx"
    part = tmp_path / "models" / "tiny" / "model.onnx.part"
    assert part.read_bytes() == hub.files[path]  # one block: all of it, not yet checked
    assert catalog.installed("tiny", directory, {"tiny": entry}) is None
    folder = catalog.install(entry, directory, hub.url)
    # The next try asks for the rest, hears there is none, and checks what it has.
    assert [(start, n) for p, start, n in hub.sent if p == path] == [
        (0, len(hub.files[path])), (len(hub.files[path]), 0)]
    assert (Path(folder) / "model.onnx").read_bytes() == hub.files[path]


@pytest.mark.parametrize("damage, message", [
    ("wrong bytes", "the hub states"),
    ("short file", "expects about"),
    ("wrong bytes, no hub hash", "does not load or run"),
])
def test_a_damaged_download_is_refused_and_nothing_changes(tiny, tmp_path, home, damage,
                                                            message):
    hub, entry = tiny
    cfg = configured(home, tmp_path)
    engine = Engine(cfg, embedder=FakeEmbedder())
    engine.sync()
    engine.close()
    before = snapshot(home)
    path = "onnx/model_quantized.onnx"
    good = hub.files[path]
    if damage == "short file":
        hub.files[path] = good[: len(good) // 2]  # announced and sent in full: too small
    else:
        hub.wrong[path] = bytes(reversed(good))
        hub.redirect = damage == "wrong bytes"
    with pytest.raises(ModelError, match=message):
        models.use("tiny", cat={"tiny": entry}, directory=str(tmp_path / "models"),
                   base_url=hub.url, make_embedder=lambda c: FakeEmbedder())
    assert snapshot(home) == before
    assert not (tmp_path / "models" / "tiny").exists()  # nothing kept, nothing to resume


@pytest.mark.parametrize("broken, message", [
    ("constant", "failed the functional check"),
    ("dimension", "160 dimensions where its catalog entry says 128"),
])
def test_a_model_failing_the_functional_check_is_refused(tmp_path, home, broken, message):
    made = tiny_model(tmp_path / "built", **(
        {"constant": True} if broken == "constant" else {"dim": 160}))
    hub = Hub({"onnx/model_quantized.onnx": made["model.onnx"],
               "tokenizer.json": made["tokenizer.json"]})
    try:
        cfg = configured(home, tmp_path)
        engine = Engine(cfg, embedder=FakeEmbedder())
        engine.sync()
        engine.close()
        before = snapshot(home)
        entry = dataclasses.replace(entry_for(made), dim=128)
        with pytest.raises(ModelError, match=message):
            models.use("tiny", cat={"tiny": entry}, directory=str(tmp_path / "models"),
                       base_url=hub.url)
        assert snapshot(home) == before
        assert not (tmp_path / "models" / "tiny").exists()
    finally:
        hub.close()


def test_no_network_is_a_clear_error_and_changes_nothing(tmp_path, home, monkeypatch,
                                                         capsys):
    cfg = configured(home, tmp_path)
    engine = Engine(cfg, embedder=FakeEmbedder())
    engine.sync()
    engine.close()
    before = snapshot(home)
    models_dir = tmp_path / "models"
    monkeypatch.setenv("NOTEWELL_MODEL_DIR", str(models_dir))
    monkeypatch.setenv("NOTEWELL_MODEL_HUB", f"http://127.0.0.1:{closed_port()}")
    assert cli.main(["model", "use", "bge-small-en-v1.5"]) == 1
    err = capsys.readouterr().err
    assert "cannot reach 127.0.0.1" in err and "nothing was changed" in err
    assert "Traceback" not in err
    # Only HTTPS leaves this machine.
    monkeypatch.setenv("NOTEWELL_MODEL_HUB", "http://mirror.invalid")
    assert cli.main(["model", "use", "bge-small-en-v1.5"]) == 1
    assert "HTTPS only" in capsys.readouterr().err
    assert cli.main(["model", "use", "no-such-model"]) == 1
    assert "bge-small-en-v1.5" in capsys.readouterr().err
    assert snapshot(home) == before and not models_dir.exists()


# -- switching --------------------------------------------------------------------------


def test_switch_to_a_catalog_model_and_back_reembeds_nothing(tiny, tmp_path, home,
                                                             monkeypatch, capsys):
    hub, entry = tiny
    cat = {**CATALOG, "tiny": entry}
    directory = str(tmp_path / "models")
    cfg = configured(home, tmp_path)
    written = "# my notes, my comments\n" + (home / "config.toml").read_text()
    (home / "config.toml").write_text(written)
    shipped = Engine(cfg)  # the shipped model indexes first
    (first,) = shipped.sync()
    shipped.close()
    assert first.embedded >= 3
    embedded: list[str] = []
    real = OnnxEmbedder.embed_batch

    def counting(self, texts):
        embedded.extend(t for t in texts if t not in PROBES)
        return real(self, texts)

    monkeypatch.setattr(OnnxEmbedder, "embed_batch", counting)

    done = models.use("tiny", cat=cat, directory=directory, base_url=hub.url)
    assert done["daemon"] is None and not done["already"]
    assert done["reports"][0]["added"] == 3 and embedded  # a new model embeds everything
    assert (home / "config.toml").read_text().startswith(written)
    table = config.load().model
    assert table == config.ModelConfig(path=done["folder"], pooling="mean", max_tokens=64,
                                       query_prefix="query: ", passage_prefix="passage: ")
    index = store.current_path(str(home / "index"))
    assert describe(index).meta["embedder"] == done["fingerprint"] != SHIPPED_FINGERPRINT
    engine = Engine(config.load())
    with engine.reading() as view:
        assert view.search("ripe bananas", mode="dense").hits[0].title == "Banana bread"
    engine.close()
    listed = {m["name"]: m for m in models.list_models(cat, directory)}
    assert listed["tiny"]["in_use"] and not listed["all-MiniLM-L6-v2"]["in_use"]
    assert listed["tiny"]["sha256"]["model.onnx"] == hashlib.sha256(
        hub.files["onnx/model_quantized.onnx"]).hexdigest()

    # Back to the shipped model: its vectors were kept, nothing is embedded.
    embedded.clear()
    assert cli.main(["model", "use", "all-MiniLM-L6-v2"]) == 0
    out = capsys.readouterr().out
    assert "; 0 embedded, " in out and "switched to all-MiniLM-L6-v2" in out
    assert "no daemon is running" in out
    assert embedded == []
    assert config.load().model is None
    assert (home / "config.toml").read_text() == written  # as the user wrote it
    assert describe(store.current_path(str(home / "index"))).meta["embedder"] == \
        SHIPPED_FINGERPRINT
    # And to the catalog model again: downloaded already, its vectors kept too.
    served = len(hub.sent)
    done = models.use("tiny", cat=cat, directory=directory, base_url=hub.url)
    assert [r["embedded"] for r in done["reports"]] == [0] and embedded == []
    assert len(hub.sent) == served
    assert models.use("tiny", cat=cat, directory=directory, base_url=hub.url)["already"]


def test_the_daemon_answers_during_the_switch_and_restarts_on_the_new_model(
        tiny, tmp_path, home):
    hub, entry = tiny
    cat = {**CATALOG, "tiny": entry}
    directory = str(tmp_path / "models")
    configured(home, tmp_path)
    daemon = start_daemon(home, fake=False)
    try:
        wait_synced(daemon)
        during: list[dict] = []

        def bars(label: str, total: int) -> Relay:
            if not during:  # the rebuild has begun: the old index still answers
                during.append(daemon.ask("search", query="ripe bananas")["result"])
                during.append(daemon.ask("status")["result"])
            return Relay(label, total, lambda event: None)

        done = models.use("tiny", cat=cat, directory=directory, base_url=hub.url,
                          progress=bars)
        assert during[0]["hits"][0]["title"] == "Banana bread"
        assert during[1]["model"] == SHIPPED_FINGERPRINT
        assert done["daemon"]["state"] == "ready"
        status = daemon.ask("status")["result"]
        assert status["model"] == done["fingerprint"] and status["notes"] == 3
        hits = daemon.ask("search", query="ripe bananas", mode="dense")["result"]["hits"]
        assert hits[0]["title"] == "Banana bread"

        back = models.use("all-MiniLM-L6-v2", cat=cat, directory=directory)
        assert [r["embedded"] for r in back["reports"]] == [0]
        assert back["daemon"]["state"] == "ready"
        assert daemon.ask("status")["result"]["model"] == SHIPPED_FINGERPRINT
    finally:
        daemon.stop()


def test_writing_model_keeps_the_rest_of_config_toml_as_written(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('debug_log = true  # while I look into it\n\n[model]  # my own\n'
                    'path = "/m/old"\npooling = "cls"\n\n# my vault\n[[sources]]\n'
                    'name = "v"\ntype = "markdown"\npath = "/notes"\n', encoding="utf-8")
    new = config.ModelConfig(path="/m/new", pooling="mean", query_prefix="query: ")
    config.save_model(new, str(path))
    text = path.read_text()
    assert text.startswith("debug_log = true  # while I look into it\n")
    assert "# my vault\n[[sources]]" in text and "/m/old" not in text
    cfg = config.load(str(path))
    assert cfg.model == new and cfg.debug_log and cfg.sources[0].path == "/notes"
    config.save_model(None, str(path))
    assert config.load(str(path)).model is None and "# my vault" in path.read_text()
    # A table this cannot edit in place: the file is written from what it says.
    path.write_text('model = { path = "/m/x" }\n[[sources]]\nname = "v"\ntype = "markdown"\n'
                    'path = "/notes"\n', encoding="utf-8")
    config.save_model(new, str(path))
    assert config.load(str(path)).model == new
    assert config.load(str(path)).sources[0].name == "v"


def test_switching_away_from_a_model_of_your_own_says_so(tiny, tmp_path, home, capsys):
    hub, entry = tiny
    own = tmp_path / "own"
    tiny_model(own, dim=96)
    cfg = configured(home, tmp_path, {"path": str(own)})
    engine = Engine(cfg)
    engine.sync()
    engine.close()
    done = models.use("tiny", cat={"tiny": entry}, directory=str(tmp_path / "models"),
                      base_url=hub.url)
    assert done["replaced"] == str(own)
    assert config.load().model.path == done["folder"]
    kept = list((home / "index").glob("vectors-*.sqlite"))
    assert len(kept) == 1  # your own model's vectors, for going back


def test_get_downloads_and_checks_without_switching(tiny, tmp_path, home):
    hub, entry = tiny
    configured(home, tmp_path)
    before = (home / "config.toml").read_bytes()
    directory = str(tmp_path / "models")
    folder = models.get("tiny", cat={"tiny": entry}, directory=directory, base_url=hub.url)
    assert folder == catalog.installed("tiny", directory, {"tiny": entry})
    assert (home / "config.toml").read_bytes() == before  # nothing switched
    assert config.load().model is None
    assert models.get(SHIPPED) is None  # the shipped model: nothing to fetch


def test_eval_self_takes_catalog_names(home):
    from notewell.evaluation import self_eval
    from notewell.evaluation.metrics import EvalError
    from notewell.model import runtime

    current = object()
    assert self_eval.model_for(SHIPPED, current) is runtime.default_embedder
    with pytest.raises(EvalError, match=re.escape("notewell model get bge-small-en-v1.5")):
        self_eval.model_for("bge-small-en-v1.5", current)
