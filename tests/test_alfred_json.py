"""Alfred's Script Filter JSON, written once (``wire.alfred_json``): the import-free encoder
writes json's bytes exactly, the daemon's result lists and the client's messages come out
of the same document writer, and the documents themselves, byte for byte."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from notewell.launcher import alfred
from notewell.notes import Hit
from notewell.wire import alfred_json, messages

JSON = dict(ensure_ascii=False, separators=(",", ":"))

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False,
                                                          allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@given(values)
def test_the_encoder_writes_exactly_what_json_writes(value):
    assert alfred_json.dumps(value) == json.dumps(value, **JSON)


def test_escapes_are_json_s_own():
    tricky = 'quote " backslash \\ nl \n tab \t cr \r bs \b ff \f bell \x07 del \x7f é 🍮 \u2028'
    assert alfred_json.dumps(tricky) == json.dumps(tricky, **JSON)
    assert json.loads(alfred_json.dumps({tricky: [tricky]})) == {tricky: [tricky]}
    assert alfred_json.dumps({"a": {}, "b": []}) == '{"a":{},"b":[]}'


def test_the_daemon_and_the_import_free_writer_give_the_same_bytes():
    hit = Hit(note_id="notes:a.md", title='Say "hi"\tthere', source="notes", kind="markdown",
              url="file:///n/a.md", path="/n/a.md", tags=["x"], heading_path="Héading",
              snippet="a\nb \\ c", passage="a\nb \\ c 🍮", score=0.5)
    items = [alfred.notice_item("No notes are tagged #x."), alfred.hit_item(hit, "q")]
    assert alfred.feedback(items, rerun=1.0, variables={"query": "q"}) == \
        alfred_json.feedback(items, rerun=1.0, variables={"query": "q"})


# -- the documents, byte for byte (what Alfred reads) ------------------------------------------


def test_a_client_message_exactly():
    assert messages.message_feedback(
        "notewell is not running", "Press Enter to start it", arg="start-daemon",
        action="start", query='a "b"') == (
        '{"skipknowledge":true,"items":[{"title":"notewell is not running",'
        '"subtitle":"Press Enter to start it","valid":true,"icon":{"path":"icon.png"},'
        '"arg":"start-daemon","variables":{"action":"start","query":"a \\"b\\""}}]}')
    assert messages.message_feedback("notewell is starting…", "Loading", rerun=0.3) == (
        '{"skipknowledge":true,"items":[{"title":"notewell is starting…","subtitle":'
        '"Loading","valid":false,"icon":{"path":"icon.png"}}],"rerun":0.3}')


def test_no_match_exactly():
    assert alfred.results_feedback([], [], "zzz") == (
        '{"skipknowledge":true,"items":[{"title":"No notes match “zzz”",'
        '"subtitle":"Try other words, or fewer of them","valid":false,'
        '"icon":{"path":"icon.png"}}],"variables":{"query":"zzz"}}')


def test_tags_exactly():
    assert alfred.tags_feedback([{"tag": "work", "notes": 2, "nested": True}], "#wo") == (
        '{"skipknowledge":true,"items":[{"uid":"tag:work","title":"#work",'
        '"subtitle":"2 notes · Enter searches #work · Tab goes into its nested tags",'
        '"arg":"#work ","autocomplete":"#work/","icon":{"path":"icon.png"},'
        '"variables":{"action":"search"}}],"variables":{"query":"#wo"}}')


def test_a_rebuilding_index_asks_again_every_second_exactly():
    assert alfred.results_feedback([], [], "q", rebuilding={"notes": 3}) == (
        '{"skipknowledge":true,"items":[{"title":"notewell is rebuilding its index…",'
        '"subtitle":"The old one was damaged and kept aside; 3 notes indexed so far, '
        'results may be incomplete","valid":false,"icon":{"path":"icon.png"}}],'
        '"rerun":1.0,"variables":{"query":"q"}}')
