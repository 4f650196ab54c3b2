"""Prepared responses: a repeated query is answered from the daemon's last answers, and
never after the index changed."""

from __future__ import annotations

from helpers import write_notes
from notewell.index.database import Index
from notewell.index.schema import BuildSettings, write_meta
from notewell.index.stamp import WriteStamp
from notewell.serve.response_cache import ResponseCache
from reliability_helpers import FakeClock


def test_version_changes_with_any_commit_from_another_connection(tmp_path):
    path = str(tmp_path / "index.db")
    index = Index(path, BuildSettings("fake", 8, "c"))
    cache = ResponseCache()
    v1 = cache.version(path)
    assert cache.version(path) == v1
    cache.put(("q",), v1, {"alfred": "x"})
    assert cache.get(("q",), v1) == {"alfred": "x"}
    with index.db:
        write_meta(index.db, "touched", "1")
    v2 = cache.version(path)
    assert v2 != v1 and cache.get(("q",), v2) is None
    cache.close()
    index.close()


def test_entries_expire_and_stay_few(tmp_path):
    clock = FakeClock()
    cache = ResponseCache(max_entries=3, ttl=0.5, clock=clock)
    version = ("p", 1)
    for i in range(5):
        cache.put(i, version, i)
    assert [cache.get(i, version) for i in range(5)] == [None, None, 2, 3, 4]
    clock.advance(0.5)
    assert cache.get(4, version) == 4  # not older than ttl yet
    clock.advance(0.25)
    assert cache.get(4, version) is None


def test_unreadable_index_means_no_caching(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database" * 100)
    assert ResponseCache().version(str(bad)) is None


def test_write_stamp_follows_commits_and_a_new_path(tmp_path):
    first, second = str(tmp_path / "one.db"), str(tmp_path / "two.db")
    indexes = [Index(p, BuildSettings("fake", 8, "c")) for p in (first, second)]
    stamp = WriteStamp()
    v1 = stamp.version(first)
    assert v1 is not None and stamp.version(first) == v1
    with indexes[0].db:
        write_meta(indexes[0].db, "touched", "1")
    assert stamp.version(first) not in (v1, None)
    assert stamp.version(second)[0] == second
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database" * 100)
    assert stamp.version(str(bad)) is None
    assert stamp.version(first) is not None  # readable again after a failure
    stamp.close()
    for index in indexes:
        index.close()


def test_daemon_repeats_are_prepared_but_edits_show_at_once(daemon, notes_dir):
    first = daemon.ask("search", query="banana bread", format="alfred")["result"]
    again = daemon.ask("search", query="banana bread", format="alfred")["result"]
    assert first == again and "Banana bread" in first["alfred"]
    write_notes(notes_dir, {"kitchen/banana-bread.md": "# Banana loaf\n\nNow with walnuts. "
                            "Banana bread, really.\n"})
    daemon.ask("sync_now")
    after = daemon.ask("search", query="banana bread", format="alfred")["result"]
    assert "Banana loaf" in after["alfred"] and after != first
