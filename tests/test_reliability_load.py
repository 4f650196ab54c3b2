"""A short run of ``bench/load.py``: concurrent clients while a changing corpus syncs;
zero errors, zero wrong answers, memory that does not run away, a consistent index."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
from helpers import REPO

pytestmark = pytest.mark.bench  # it runs bench/load.py: not part of the default run


def load_bench():
    # Loaded by the test, not at collection: a default run does not import bench/.
    spec = importlib.util.spec_from_file_location("notewell_bench_load",
                                                  REPO / "bench" / "load.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def short_load(tmp_path, monkeypatch):
    load = load_bench()
    monkeypatch.setenv("NOTEWELL_HOME", str(tmp_path / "home"))  # run_load sets it too
    result = load.run_load(tmp_path / "home", tmp_path / "notes", seconds=3.0, clients=3,
                           stable=60, churn=30)
    print(f"load: {result.summary()}")
    assert os.environ["NOTEWELL_HOME"] == str(tmp_path / "home")
    return result


def test_concurrent_clients_while_syncing_get_only_right_answers(tmp_path, monkeypatch):
    result = short_load(tmp_path, monkeypatch)
    # How much gets done in the 3 s depends on the machine; that any does, and all of it
    # right, does not.
    assert result.requests >= 3 and result.syncs >= 1 and result.edits > 0
    assert not result.errors, result.errors[:5]
    assert not result.wrong, result.wrong[:5]
    assert not result.index_problems
    # a short run only shows a leak that is fast; the figures are what bench/load.py prints
    assert result.rss_after_kb < result.rss_before_kb + 64 * 1024


@pytest.mark.bench
def test_under_load_the_slowest_answers_stay_under_a_second(tmp_path, monkeypatch):
    result = short_load(tmp_path, monkeypatch)
    assert not result.errors and result.requests > 100 and result.syncs >= 3
    assert result.summary()["p99_ms"] < 1000
