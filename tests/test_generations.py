"""Index generations: each request reads one generation (index and searcher) from its start
to its reply, whatever switches happen meanwhile, and a replaced generation is closed and
its file deleted when its last request lets go, however long that takes (no fixed time).

Each generation's index holds a note of its own ("Generation N", tagged #genN), so which
generation answered is visible in every reply."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import write_notes
from notewell.config import Config, SourceConfig
from notewell.engine import Engine, rebuild
from notewell.index import store
from notewell.index.database import Index
from notewell.index.schema import BuildSettings
from notewell.model.fake import FakeEmbedder
from notewell.search.generation import Generation, Generations
from notewell.search.searcher import Searcher
from notewell.serve.background import Background
from notewell.serve.handlers import Handlers
from reliability_helpers import FakeClock

SWITCHES = 25


def write_marker(folder: Path, n: int) -> None:
    (folder / "marker.md").write_text(f"# Generation {n}\n\nmarker note #gen{n}\n",
                                      encoding="utf-8")


class Daemonish:
    """An engine with the daemon's background loop (stepped by the test on a fake clock)
    and its handlers (their real worker pool); ``publish`` builds the next generation
    beside, as ``notewell index --rebuild`` would, and lets the loop switch to it."""

    def __init__(self, tmp_path: Path, embedder: FakeEmbedder) -> None:
        self.folder = write_notes(tmp_path / "notes", {"a.md": "# A\n\nalpha\n"})
        write_marker(self.folder, 1)
        self.clock = FakeClock()
        cfg = Config(sources=(SourceConfig("notes", "markdown", str(self.folder)),))
        self.engine = Engine(cfg, embedder=embedder, index_dir=str(tmp_path / "idx"))
        self.engine.sync()
        self.number_of = {self.engine.index.path: 1}  # index file -> its marker's number
        self.bg = Background(lambda: self.engine, threading.Event(), use_events=False,
                             clock=self.clock)
        assert self.bg.start_engine()
        self.handlers = Handlers(cfg, self.bg, request_stop=lambda: None, clock=self.clock)
        self.generations = [self.engine.generations.current]

    def publish(self, n: int) -> None:
        write_marker(self.folder, n)
        path, _ = rebuild(self.engine.sources, self.engine.embedder, self.engine.chunker,
                          self.engine.index_dir)
        assert path is not None
        self.number_of[path] = n
        self.bg.step()  # no watcher: it switches to the newer file, then syncs
        self.clock.advance(60.0)  # requests may run any time: nothing waits it out
        current = self.engine.generations.current
        assert current.index.path == path
        self.generations.append(current)

    def close(self) -> None:
        self.handlers.shutdown()
        self.engine.close()


@contextmanager
def daemonish(tmp_path: Path, embedder: FakeEmbedder) -> Iterator[Daemonish]:
    d = Daemonish(tmp_path, embedder)
    try:
        yield d
    finally:
        d.close()


def marker_numbers(hits: list[dict]) -> set[int]:
    return {int(m.group(1)) for h in hits if (m := re.fullmatch(r"Generation (\d+)",
                                                               h["title"]))}


def index_files(index_dir: str) -> list[str]:
    """The generations' files in ``index_dir``, without their WAL files."""
    return sorted({re.sub(r"-(wal|shm)$", "", n) for n in os.listdir(index_dir)
                   if n.startswith("index-")})


# -- the owner of generations, alone ----------------------------------------------------------


def make_generation(directory: Path) -> Generation:
    index = Index(store.next_path(str(directory)), BuildSettings("fake-hash:64", 64, ""))
    return Generation(index, Searcher(index, FakeEmbedder()))


def test_a_retired_generation_held_by_a_request_is_closed_only_when_released(tmp_path):
    first = make_generation(tmp_path)
    gens = Generations(first, str(tmp_path))
    with gens.use() as held:
        assert held is first
        second = make_generation(tmp_path)
        assert gens.switch(second) is first
        assert gens.current is second and gens._retired == [first]
        assert not first.closed and os.path.exists(first.index.path)
        assert first.index.counts()["notes"] == 0  # still answers
        third = make_generation(tmp_path)
        gens.switch(third)  # nobody held the second: closed and deleted at once
        assert second.closed and not os.path.exists(second.index.path)
        assert not first.closed and os.path.exists(first.index.path)
    assert first.closed and not os.path.exists(first.index.path)
    assert gens._retired == [] and not third.closed
    assert index_files(str(tmp_path)) == [os.path.basename(third.index.path)]
    gens.close()
    assert third.closed and os.path.exists(third.index.path)  # the current stays on disk


def probe(d: Daemonish, pause=None):
    """A request that reads the index several times through its view, as ``op_search``
    does: ``pause`` runs between its first read and the others."""

    def op(req: dict, view) -> dict:
        path = view.status()["index_path"]
        if pause is not None:
            pause()
        hits = [h.to_dict() for h in view.search(req["query"]).hits]
        tags = view.tag_completions("#gen") or []
        seen = {d.number_of[path], d.number_of[view.index_path],
                d.number_of[view.searcher.index.path]}
        return {"seen": seen | marker_numbers(hits) | {int(t["tag"][3:]) for t in tags}}

    return op


def test_a_request_on_a_retired_generation_finishes_on_it_however_long_it_takes(tmp_path):
    with daemonish(tmp_path, FakeEmbedder()) as d:
        entered, go = threading.Event(), threading.Event()
        d.handlers.ops["probe"] = probe(d, lambda: (entered.set(), go.wait(30)))
        replies: list[dict] = []
        request = threading.Thread(target=lambda: replies.append(
            d.handlers.answer({"op": "probe", "query": "marker held"})))
        request.start()
        assert entered.wait(30)  # the request has read generation 1 once
        first = d.generations[0]
        d.publish(2)
        d.clock.advance(3600.0)
        d.bg.step()
        assert not first.closed and os.path.exists(first.index.path)
        go.set()
        request.join(30)
        assert replies[0]["ok"], replies
        assert replies[0]["result"]["seen"] == {1}  # all of it from the one it started on
        assert first.closed and not os.path.exists(first.index.path)
        after = d.handlers.answer({"op": "probe", "query": "marker after"})
        assert after["result"]["seen"] == {2}


# -- requests racing many switches -------------------------------------------------------------


def test_requests_running_while_generations_switch_each_answer_from_one(tmp_path):
    # A slow model (each query's vector takes 2 ms): switches land mid-request.
    with daemonish(tmp_path, FakeEmbedder(delay=0.002)) as d:
        d.handlers.ops["probe"] = probe(d)  # several reads in one request
        stop = threading.Event()
        failures: list[str] = []
        answered: list[int] = []

        def current_number() -> int:
            return d.number_of[d.engine.generations.current.index.path]

        def one_request(i: int) -> None:
            before = current_number()
            op = [{"op": "probe"}, {"op": "search", "format": "json"}, {"op": "status"}][i % 3]
            reply = d.handlers.answer({**op, "query": f"marker {i}"})
            if not reply or not reply["ok"]:
                failures.append(f"{op}: {reply}")
                return
            result = reply["result"]
            seen = (set(result["seen"]) if op["op"] == "probe"
                    else {d.number_of[result["index_path"]]} if op["op"] == "status"
                    else marker_numbers(result["hits"]))
            after = current_number()
            if len(seen) != 1 or not before <= min(seen) <= after:
                failures.append(f"request {i} saw generations {seen}, between {before} "
                                f"and {after}")
            answered.append(i)

        def client(k: int) -> None:
            i = k
            while not stop.is_set():
                try:
                    one_request(i)
                except Exception as e:  # every failure is reported
                    failures.append(f"request {i}: {type(e).__name__}: {e}")
                i += 4

        clients = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in clients:
            t.start()
        try:
            for n in range(2, SWITCHES + 2):
                d.publish(n)
        finally:
            stop.set()
            for t in clients:
                t.join(60)
        assert not failures, failures[:5]
        assert len(answered) >= SWITCHES
        # Once idle, every replaced generation is closed and its file gone.
        assert d.engine.generations._retired == []
        assert all(g.closed for g in d.generations[:-1])
        assert not d.generations[-1].closed
        assert index_files(d.engine.index_dir) == [
            os.path.basename(d.generations[-1].index.path)]


@pytest.mark.parametrize("held", [False, True])
def test_the_re_chunk_after_an_upgrade_goes_through_the_same_switch(tmp_path, held):
    """``Engine.sync``'s rebuild branch: the old file answers a request that holds it,
    and is closed and deleted when that request ends (at once when none does)."""
    from notewell.ingest.chunking import ChunkSettings

    folder = write_notes(tmp_path / "notes", {"a.md": "# A\n\nalpha\n"})
    cfg = Config(sources=(SourceConfig("notes", "markdown", str(folder)),))
    Engine(cfg, embedder=FakeEmbedder(), index_dir=str(tmp_path / "idx")).sync()
    engine = Engine(cfg, embedder=FakeEmbedder(), chunker=ChunkSettings(max_pieces=99),
                    index_dir=str(tmp_path / "idx"))
    old = engine.generations.current
    assert old.index.other_chunker is not None
    try:
        if held:
            with engine.reading() as view:
                engine.sync()
                assert engine.generations.current is not old and not old.closed
                assert view.search("alpha").hits and view.generation is old
        else:
            engine.sync()
        assert old.closed and not os.path.exists(old.index.path)
        with engine.reading() as view:
            assert engine.index.other_chunker is None and view.search("alpha").hits
    finally:
        engine.close()
