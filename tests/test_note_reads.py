"""The reads agents and the CLI share: a note's text by id and heading, tags with counts,
recent notes, and date filters on search; in the library, over the socket and from the
command line."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timezone

import pytest
from helpers import notewell_command, start_daemon, subprocess_env, wait_synced, write_notes
from notewell.engine import ArgumentError, Engine, HeadingNotFound, NoteNotFound
from notewell.search.dates import DateError
from notewell.wire.requests import BadArguments, request_args
from reliability_helpers import FakeClock

LONG = "# Handbook\n\nIntro line.\n\n## Setup\n\nInstall it.\n\n### Linux\n\napt install x\n\n" \
       "### macOS\n\nbrew install x\n\n## Usage\n\nRun it.\n\n```\n# not a heading\n```\n"
MORE = {
    "work/handbook.md": "---\ntags: [work/projects/alpha, work]\n---\n" + LONG,
    "work/plan.md": "# Plan\n\nQuarterly plan. #work/projects/beta\n",
}
DAY = 86_400
NOW = datetime(2025, 7, 15, 12, tzinfo=timezone.utc).timestamp()
# Modification times: the note's position in the list is how many 30-day months ago.
AGES = {"travel/lisbon.md": 0, "kitchen/banana-bread.md": 1, "db/postgres-vacuum.md": 2,
        "git/undo-commit.md": 3, "work/handbook.md": 4, "work/plan.md": 5}


def date_notes(root) -> None:
    write_notes(root)
    write_notes(root, MORE)
    for rel, months in AGES.items():
        t = NOW - months * 30 * DAY - DAY
        os.utime(root / rel, (t, t))


@pytest.fixture
def lib(notes_config, notes_dir, fake_embedder):
    date_notes(notes_dir)
    e = Engine(notes_config, embedder=fake_embedder, clock=FakeClock(NOW))
    e.sync()
    yield e
    e.close()


def titles(result) -> list[str]:
    return [h.title for h in result.hits]


# -- note text --------------------------------------------------------------------------------


def test_a_note_is_its_markdown_with_its_details(lib):
    with lib.reading() as view:
        page = view.note("notes:work/handbook.md")
    assert page["text"].startswith("# Handbook\n\nIntro line.")
    assert "brew install x" in page["text"] and "tags:" not in page["text"]
    assert page["title"] == "Handbook" and page["source"] == "notes"
    assert sorted(page["tags"]) == ["work", "work/projects/alpha"]
    assert page["next_offset"] is None and page["offset"] == 0
    assert page["total_chars"] == len(page["text"])
    assert page["headings"] == ["Setup", "Setup > Linux", "Setup > macOS", "Usage"]
    assert page["url"] and page["path"].endswith("handbook.md")
    assert page["modified"] == pytest.approx(NOW - 4 * 30 * DAY - DAY)


@pytest.mark.parametrize("heading", ["Setup", "setup", "  SETUP "])
def test_a_section_includes_its_subsections_and_stops_at_its_sibling(lib, heading):
    with lib.reading() as view:
        page = view.note("notes:work/handbook.md", heading=heading)
    assert page["text"].startswith("## Setup")
    assert "apt install x" in page["text"] and "brew install x" in page["text"]
    assert "Usage" not in page["text"] and "Intro" not in page["text"]
    assert page["heading"] == heading


def test_a_section_by_path_and_a_heading_inside_code_is_no_heading(lib):
    with lib.reading() as view:
        page = view.note("notes:work/handbook.md", heading="Setup > macOS")
    assert page["text"] == "### macOS\n\nbrew install x"
    with lib.reading() as view:
        usage = view.note("notes:work/handbook.md", heading="Usage")["text"]
    assert "# not a heading" in usage  # the fenced line stays in the section
    with (pytest.raises(HeadingNotFound, match=r"not a heading.*its headings: Setup; "),
          lib.reading() as view):
        view.note("notes:work/handbook.md", heading="not a heading")


def test_an_empty_heading_is_the_whole_note(lib):
    """A hit's heading path is empty for text above the first heading."""
    with lib.reading() as view:
        page = view.note("notes:work/handbook.md", heading=" ")
    assert page["heading"] is None and page["text"].startswith("# Handbook")


def test_every_hits_heading_path_finds_its_section(lib):
    """What search shows as a hit's heading path is what get_note's heading takes."""
    for query in ("install", "linux apt", "vacuum", "bananas", "release plan"):
        with lib.reading() as view:
            for hit in view.search(query, limit=20).hits:
                page = view.note(hit.note_id, heading=hit.heading_path)
                assert hit.passage.split()[0] in page["text"], (query, hit.heading_path)


def test_long_notes_come_in_pages_that_join_up(lib):
    pages, offset = [], 0
    while offset is not None:
        with lib.reading() as view:
            page = view.note("notes:work/handbook.md", offset=offset, max_chars=25)
        assert 0 < len(page["text"]) <= 25
        pages.append(page["text"])
        offset = page["next_offset"]
    with lib.reading() as view:
        whole = view.note("notes:work/handbook.md")["text"]
    assert "".join(pages) == whole and len(pages) > 3
    # Pages end at a line break when one is in their second half.
    assert all(p.endswith("\n") for p in pages[:-1] if "\n" in p[12:])


def test_bad_paging_and_unknown_notes_are_named(lib):
    with (pytest.raises(ArgumentError, match=r"^offset: 9999 is past the end"),
          lib.reading() as view):
        view.note("notes:work/plan.md", offset=9999)
    # Types and ranges are the ones every path checks before it reads (wire.requests).
    with pytest.raises(BadArguments, match=r"^offset: must be 0 or more, got -1"):
        request_args("note", {"note_id": "notes:work/plan.md", "offset": -1})
    with pytest.raises(BadArguments, match=r"^max_chars: must be from 1 to 40000, got 0"):
        request_args("note", {"note_id": "notes:work/plan.md", "max_chars": 0})
    with (pytest.raises(NoteNotFound, match=r"no note with id 'notes:nope.md'"),
          lib.reading() as view):
        view.note("notes:nope.md")


def test_only_indexed_notes_of_configured_sources_are_read(lib, notes_dir):
    """A crafted id cannot reach a file outside the sources, nor an excluded one."""
    outside = notes_dir.parent / "outside.md"
    outside.write_text("# Outside\n\nnot a note\n")
    for note_id in ("notes:../outside.md", "notes:private/secret.md",
                    f"notes:{outside}", "other:work/plan.md"):
        with pytest.raises(NoteNotFound), lib.reading() as view:
            view.note(note_id)


def test_a_note_deleted_since_the_sync_is_not_found_with_a_reason(lib, notes_dir):
    (notes_dir / "work" / "plan.md").unlink()
    with pytest.raises(NoteNotFound, match=r"no longer in its source"), lib.reading() as view:
        view.note("notes:work/plan.md")


# -- tags ---------------------------------------------------------------------------------------


def test_tags_count_notes_and_nested_parents_count_each_note_once(lib):
    with lib.reading() as view:
        tags = {t["tag"]: t["notes"] for t in view.tags()}
    assert tags["work"] == 2  # handbook (work and work/projects/alpha) once, plan
    assert tags["work/projects"] == 2
    assert tags["work/projects/alpha"] == 1 and tags["work/projects/beta"] == 1
    assert tags["db"] == 1 and tags["db/maintenance"] == 1 and tags["postgres"] == 1
    assert tags["recipes"] == 1 and tags["travel"] == 1
    assert list(tags) == sorted(tags)


def test_tags_by_prefix(lib):
    with lib.reading() as view:
        assert [t["tag"] for t in view.tags("#Work/P")] == [
            "work/projects", "work/projects/alpha", "work/projects/beta"]
        assert view.tags("zzz") == []


# -- recent and dates ------------------------------------------------------------------------------


def test_recent_notes_newest_first_within_filters(lib):
    with lib.reading() as view:
        assert titles(view.recent(3)) == ["Lisbon weekend", "Banana bread", "Postgres vacuum"]
        assert titles(view.recent(10, tags=["work"])) == ["Handbook", "Plan"]
        assert titles(view.recent(10, source="notes", tags=["#work/projects/beta"])) == ["Plan"]
        result = view.recent(10, source="elsewhere")
    assert result.hits == [] and "elsewhere" in result.notices[0]


def test_date_filters_are_half_open_spans(lib):
    with lib.reading() as view:
        assert titles(view.recent(10, modified_after="45d")) == ["Lisbon weekend", "Banana bread"]
        assert titles(view.recent(10, modified_before="3m")) == ["Handbook", "Plan"]
        june = view.recent(10, modified_after="2025-06", modified_before="2025-07")
    assert titles(june) == ["Banana bread"]  # NOW - 31 days: 14 June
    with lib.reading() as view:
        assert titles(view.recent(10, modified_after=NOW - 2 * DAY)) == ["Lisbon weekend"]
        nothing = view.recent(10, modified_after="2030")
    assert nothing.hits == [] and nothing.notices == ["No note was modified in that time."]


def test_search_takes_dates_tags_and_source_as_arguments(lib):
    with lib.reading() as view:
        assert titles(view.search("vacuum planner statistics"))[0] == "Postgres vacuum"
        recent = titles(view.search("vacuum planner statistics", modified_after="45d"))
    assert recent and set(recent) <= {"Lisbon weekend", "Banana bread"}
    with lib.reading() as view:
        assert titles(view.search("install", tags=["work"], modified_after="2025-03")) == [
            "Handbook"]
        assert titles(view.search("install", tags=["work"], modified_before="2025-03")) == [
            "Plan"]
        assert titles(view.search("plan", source="notes", tags=["work/projects"]))[0] == "Plan"


def test_bad_dates_and_crossed_bounds_are_errors_not_empty_results(lib):
    with (pytest.raises(DateError, match=r"modified_after: cannot read 'last tuesday'.*7d"),
          lib.reading() as view):
        view.search("x", modified_after="last tuesday")
    with pytest.raises(ArgumentError, match=r"modified_before"), lib.reading() as view:
        view.recent(5, modified_after="2025-06", modified_before="2025-05")


# -- over the socket and from the command line ---------------------------------------------


@pytest.fixture
def dated_daemon(home, notes_config, notes_dir):
    date_notes(notes_dir)
    d = start_daemon(home)
    wait_synced(d)
    yield d
    d.stop()


def test_the_daemon_ops_answer_as_the_library(dated_daemon):
    d = dated_daemon
    page = d.ask("note", note_id="notes:work/handbook.md", heading="Setup > Linux")
    assert page["ok"] and page["result"]["text"] == "### Linux\n\napt install x"
    tags = d.ask("tags", prefix="work/projects")["result"]["tags"]
    assert tags[0] == {"tag": "work/projects", "notes": 2}
    recent = d.ask("recent", limit=2)["result"]
    assert [h["title"] for h in recent["hits"]] == ["Lisbon weekend", "Banana bread"]
    dated = d.ask("search", query="install", modified_after=NOW - 125 * DAY,
                  tags=["work"])["result"]
    assert [h["title"] for h in dated["hits"]] == ["Handbook"]
    old = d.ask("recent", limit=10, modified_before="2000")["result"]
    assert old["hits"] == [] and old["notices"]


@pytest.mark.parametrize(("op", "args", "code", "words"), [
    ("note", {"note_id": "notes:nope.md"}, "not_found", "notes:nope.md"),
    ("note", {"note_id": "notes:work/plan.md", "heading": "Nope"}, "not_found", "Nope"),
    ("note", {}, "bad_args", "note_id"),
    ("note", {"note_id": "notes:work/plan.md", "max_chars": "9"}, "bad_args", "max_chars"),
    ("note", {"note_id": "notes:work/plan.md", "offset": 10**6}, "bad_args", "offset"),
    ("search", {"query": "x", "modified_after": "someday"}, "bad_date", "7d"),
    ("search", {"query": "x", "tags": "work"}, "bad_args", "tags"),
    ("recent", {"modified_before": True}, "bad_args", "modified_before"),
    ("tags", {"prefix": 3}, "bad_args", "prefix"),
])
def test_bad_arguments_are_error_replies_that_name_them(dated_daemon, op, args, code, words):
    reply = dated_daemon.ask(op, **args)
    assert not reply["ok"] and reply["error"]["code"] == code
    assert words in reply["error"]["message"]
    assert dated_daemon.ask("ping")["ok"]


def run(home, *args):
    return subprocess.run(notewell_command(*args), capture_output=True, text=True,
                          env=subprocess_env(home), timeout=60, check=False)


@pytest.mark.parametrize("with_daemon", [True, False])
def test_show_tags_recent_commands(home, notes_config, notes_dir, with_daemon):
    date_notes(notes_dir)
    d = None
    if with_daemon:
        d = start_daemon(home)
        wait_synced(d)
    else:
        assert run(home, "index", "--quiet").returncode == 0
    try:
        out = run(home, "show", "notes:work/handbook.md", "--heading", "usage")
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("## Usage\n\nRun it.")
        out = run(home, "show", "notes:work/handbook.md", "--max-chars", "20", "--json")
        page = json.loads(out.stdout)
        assert page["next_offset"] and len(page["text"]) <= 20
        out = run(home, "show", "notes:work/handbook.md", "--max-chars", "20")
        assert "--offset" in out.stderr
        out = run(home, "show", "notes:missing.md")
        assert out.returncode == 1 and "notes:missing.md" in out.stderr
        out = run(home, "tags", "work")
        assert out.returncode == 0 and "     2  #work/projects\n" in out.stdout
        out = run(home, "recent", "--limit", "1", "--json")
        assert json.loads(out.stdout)[0]["title"] == "Lisbon weekend"
        out = run(home, "recent", "--tag", "work", "--before", "2999")
        assert "Handbook" in out.stdout and "Lisbon" not in out.stdout
        out = run(home, "recent", "--after", "soonish")
        assert out.returncode == 1 and out.stderr.startswith(
            "notewell: --after: cannot read 'soonish' as a date; use an ISO date")
        assert "Traceback" not in out.stderr
        out = run(home, "search", "install", "#work", "--before", "2025-03", "--json")
        assert [h["title"] for h in json.loads(out.stdout)] == ["Plan"]
    finally:
        if d is not None:
            d.stop()


def test_similar_is_strict_about_unknown_ids_only_when_asked(dated_daemon):
    loose = dated_daemon.ask("similar", note_id="notes:nope.md")
    assert loose["ok"] and loose["result"]["hits"] == []
    strict = dated_daemon.ask("similar", note_id="notes:nope.md", strict=True)
    assert strict["error"]["code"] == "not_found" and "notes:nope.md" in strict["error"][
        "message"]
    found = dated_daemon.ask("similar", note_id="notes:work/plan.md", strict=True)
    assert found["ok"] and found["result"]["hits"]
