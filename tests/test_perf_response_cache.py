"""Prepared responses: a repeated query is answered from the daemon's last answers, and
never after the index changed."""

from __future__ import annotations

import time

from helpers import write_notes
from notewell.index.database import BuildSettings, Index, connect
from notewell.serve.response_cache import ResponseCache


def test_version_changes_with_any_commit_from_another_connection(tmp_path):
    path = str(tmp_path / "index.db")
    index = Index(path, BuildSettings("fake", 8, "c"))
    cache = ResponseCache(connect)
    v1 = cache.version(path)
    assert cache.version(path) == v1
    cache.put(("q",), v1, {"alfred": "x"})
    assert cache.get(("q",), v1) == {"alfred": "x"}
    with index.db:
        index.set_meta("touched", "1")
    v2 = cache.version(path)
    assert v2 != v1 and cache.get(("q",), v2) is None
    cache.close()
    index.close()


def test_entries_expire_and_stay_few(tmp_path):
    cache = ResponseCache(connect, max_entries=3, ttl=0.05)
    version = ("p", 1)
    for i in range(5):
        cache.put(i, version, i)
    assert [cache.get(i, version) for i in range(5)] == [None, None, 2, 3, 4]
    time.sleep(0.08)
    assert cache.get(4, version) is None


def test_unreadable_index_means_no_caching(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database" * 100)
    assert ResponseCache(connect).version(str(bad)) is None


def test_daemon_repeats_are_prepared_but_edits_show_at_once(daemon, notes_dir):
    first = daemon.ask("search", query="banana bread", format="alfred")["result"]
    again = daemon.ask("search", query="banana bread", format="alfred")["result"]
    assert first == again and "Banana bread" in first["alfred"]
    write_notes(notes_dir, {"kitchen/banana-bread.md": "# Banana loaf\n\nNow with walnuts. "
                            "Banana bread, really.\n"})
    daemon.ask("sync", wait=True)
    after = daemon.ask("search", query="banana bread", format="alfred")["result"]
    assert "Banana loaf" in after["alfred"] and after != first
