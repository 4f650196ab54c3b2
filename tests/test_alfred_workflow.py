"""The Alfred workflow: its info.plist, the .alfredworkflow zip, the actions its connections
run (with stand-in macOS commands), and the stale-Enter guard."""

from __future__ import annotations

import json
import os
import plistlib
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest
from helpers import REPO, SCRIPTS, run_client, start_daemon, subprocess_env, wait_synced
from launcher_helpers import alfred_env, install_stand_ins, installation, runs, unpack
from notewell import config
from notewell.launcher import alfred, alfred_actions, alfred_workflow, icons
from notewell.launcher.alfred_workflow import ALT, CMD, CTRL, FN, SHIFT
from notewell.notes import Hit
from notewell.wire import paths

SCRIPT_FILTER = "alfred.workflow.input.scriptfilter"


def objects_by_type(plist: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for obj in plist["objects"]:
        out.setdefault(obj["type"], []).append(obj)
    return out


def search_filter(plist: dict) -> dict:
    """The search's Script Filter (the other one lists related notes: test_related_*)."""
    (sf,) = [o for o in objects_by_type(plist)[SCRIPT_FILTER]
             if o["config"]["keyword"] == "{var:keyword}"]
    return sf


@pytest.fixture
def built(home: Path, tmp_path: Path) -> Path:
    return Path(alfred_workflow.build(str(tmp_path / "out" / "notewell.alfredworkflow")))


def read_zip(path: Path) -> dict[str, zipfile.ZipInfo]:
    with zipfile.ZipFile(path) as zf:
        return {info.filename: info for info in zf.infolist()}


def test_the_workflow_is_a_zip_with_plist_icons_and_scripts_at_its_root(built: Path):
    entries = read_zip(built)
    for name in ("info.plist", "icon.png", "icons/bear.png", "icons/obsidian.png",
                 "icons/markdown.png", "notewell-query.zsh", "notewell-run.zsh"):
        assert name in entries, name
    with zipfile.ZipFile(built) as zf:
        plist = plistlib.loads(zf.read("info.plist"))
        for name in entries:
            if name.endswith(".png"):
                data = zf.read(name)
                assert data[:8] == b"\x89PNG\r\n\x1a\n"
                assert int.from_bytes(data[16:20], "big") == 256  # width from IHDR
        # Its own copy of the zsh client, of this notewell's version.
        for name in ("notewell-query.zsh", "notewell-run.zsh"):
            assert zf.read(name) == (SCRIPTS / name).read_bytes()
    assert plist["bundleid"] == "com.notewell.alfred"


def test_script_filter_config(built: Path):
    with zipfile.ZipFile(built) as zf:
        plist = plistlib.loads(zf.read("info.plist"))
    sf = search_filter(plist)
    cfg = sf["config"]
    assert cfg["keyword"] == "{var:keyword}"
    keyword, _related = plist["userconfigurationconfig"]
    assert keyword["variable"] == "keyword" and keyword["config"]["default"] == "n"
    assert cfg["scriptargtype"] == 1, "the query must arrive as argv, never as {query}"
    assert "{query}" not in cfg["script"]
    assert cfg["queuemode"] == 2, "terminate the previous script on each keystroke"
    assert cfg["queuedelaymode"] == 0 and cfg["queuedelayimmediatelyinitially"] is True
    assert cfg["alfredfiltersresults"] is False
    assert cfg["argumenttype"] == 1 and cfg["withspace"] is True
    # Alfred's /bin/zsh sources the workflow's own zsh client (Alfred runs scripts in the
    # workflow's folder), query as $1; the only machine path is the home it passes on.
    assert cfg["type"] == 5
    assert shlex.split(cfg["script"]) == ["source", "./notewell-query.zsh", "$1"]
    assert plist["variables"] == {"NOTEWELL_HOME": os.environ["NOTEWELL_HOME"]}
    assert set(plist["variablesdontexport"]) == set(plist["variables"])


def plist_strings(value) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *plist_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in plist_strings(v)]
    return [value] if isinstance(value, str) else []


def test_no_python_path_is_baked_into_the_workflow(built: Path):
    """A Python upgrade moves the interpreter and lib/python3.X/site-packages: nothing in
    info.plist may name them (nor this checkout, where the package lives)."""
    with zipfile.ZipFile(built) as zf:
        plist = plistlib.loads(zf.read("info.plist"))
    strings = plist_strings(plist)
    assert any("notewell-query.zsh" in s for s in strings)
    for s in strings:
        assert not re.search(r"python3\.\d+|site-packages|/bin/python", s), s
        assert str(REPO) not in s and os.path.dirname(sys.executable) not in s, s


def test_connections_reference_objects_and_carry_the_modifiers(built: Path):
    with zipfile.ZipFile(built) as zf:
        plist = plistlib.loads(zf.read("info.plist"))
    uids = {o["uid"] for o in plist["objects"]}
    assert len(uids) == len(plist["objects"])
    for source, wires in plist["connections"].items():
        assert source in uids
        for wire in wires:
            assert wire["destinationuid"] in uids
            assert set(wire) == {"destinationuid", "modifiers", "modifiersubtext", "vitoclose"}
    assert set(plist["uidata"]) == uids
    types = objects_by_type(plist)
    sf = search_filter(plist)
    wires = {w["modifiers"]: w for w in plist["connections"][sf["uid"]]}
    assert set(wires) == {0, CMD, ALT, CTRL, SHIFT, FN}
    assert (CMD, ALT, CTRL, SHIFT, FN) == (1048576, 524288, 262144, 131072, 8388608)
    by_uid = {o["uid"]: o for o in plist["objects"]}
    for modifier, action in ((0, "open"), (CMD, "reveal"), (ALT, "copy"), (CTRL, "copy"),
                             (SHIFT, "quicklook")):
        target = by_uid[wires[modifier]["destinationuid"]]
        assert target["type"] == "alfred.workflow.action.script"
        assert target["config"]["scriptargtype"] == 1 and target["config"]["type"] == 5
        assert shlex.split(target["config"]["script"]) == [
            "source", "./notewell-query.zsh", "--alfred-action", action, "$1"]
    # fn: Call External Trigger -> External Trigger -> back into the Script Filter.
    call = by_uid[wires[FN]["destinationuid"]]
    assert call["type"] == "alfred.workflow.output.callexternaltrigger"
    (trigger,) = types["alfred.workflow.trigger.external"]
    assert call["config"]["externaltriggerid"] == trigger["config"]["triggerid"] == "search"
    assert call["config"]["workflowbundleid"] == "self"
    assert [w["destinationuid"] for w in plist["connections"][trigger["uid"]]] == [sf["uid"]]


def hit(**over) -> Hit:
    base = dict(note_id="notes:db/pg.md", title="Postgres vacuum", source="notes",
                kind="markdown", url="file:///n/db/pg.md", path="/n/db/pg.md", tags=[],
                heading_path="", snippet="Run VACUUM.", passage="Run VACUUM ANALYZE.",
                score=0.5)
    base.update(over)
    return Hit(**base)


@pytest.mark.parametrize("kind", ["markdown", "obsidian", "bear"])
def test_items_and_workflow_agree(built: Path, kind: str):
    """Every modifier an item defines has a wire, every action it names is handled, every
    icon it points at ships in the zip."""
    path = None if kind == "bear" else "/n/db/pg.md"
    item = alfred.hit_item(hit(kind=kind, path=path), "vac")
    with zipfile.ZipFile(built) as zf:
        plist = plistlib.loads(zf.read("info.plist"))
        names = set(zf.namelist())
    sf = search_filter(plist)
    wired = {w["modifiers"] for w in plist["connections"][sf["uid"]]}
    assert set(item["mods"]) == {"cmd", "alt", "ctrl", "shift", "fn"}
    for mod, spec in item["mods"].items():
        assert alfred_workflow.MODIFIERS[mod] in wired
        assert spec["subtitle"], f"{mod} must say what it does"
        assert spec["variables"]["query"] == "vac"
        assert spec["variables"]["note_id"] == "notes:db/pg.md"
        action = spec["variables"]["action"]
        assert action == "similar" or action in alfred_actions.FILE_ACTIONS
    assert item["mods"]["fn"]["arg"] == "similar:notes:db/pg.md"
    assert item["icon"]["path"] in names
    assert item["text"]["largetype"] == item["text"]["copy"] == "Run VACUUM ANALYZE."
    assert ("quicklookurl" in item) == (path is not None)
    assert "icon.png" in names  # message items use it


def pixels(png: bytes) -> tuple[int, int, bytes]:
    """RGBA rows of a PNG as ``icons.png`` writes it (8-bit RGBA, filter 0)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    i, idat, width, height = 8, b"", 0, 0
    while i < len(png):
        n = int.from_bytes(png[i:i + 4], "big")
        tag, body = png[i + 4:i + 8], png[i + 8:i + 8 + n]
        if tag == b"IHDR":
            width, height = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big")
            assert body[8:10] == b"\x08\x06"  # 8-bit RGBA
        elif tag == b"IDAT":
            idat += body
        i += 12 + n
    raw = zlib.decompress(idat)
    stride = width * 4 + 1
    assert all(raw[y * stride] == 0 for y in range(height))
    return width, height, b"".join(raw[y * stride + 1:(y + 1) * stride] for y in range(height))


def same_picture(a: bytes, b: bytes) -> bool:
    # Within one level per channel: another libm may round an edge pixel differently.
    (wa, ha, pa), (wb, hb, pb) = pixels(a), pixels(b)
    return (wa, ha) == (wb, hb) and all(abs(x - y) <= 1 for x, y in zip(pa, pb))


def test_checked_in_workflow_sources_match_the_generator():
    wf = REPO / "workflow" / "alfred"
    expected = alfred_workflow.plist_bytes()
    assert (wf / "info.plist").read_bytes() == expected, \
        "run: python -m notewell.launcher.alfred_workflow ."
    for rel, data in icons.alfred_files().items():
        assert same_picture((wf / rel).read_bytes(), data), \
            "run: python -m notewell.launcher.icons ."
    raycast = REPO / "workflow" / "raycast" / "assets"
    assert same_picture((raycast / "icon.png").read_bytes(), icons.render("app", 512))
    for kind in ("bear", "obsidian", "markdown"):
        assert same_picture((raycast / f"{kind}.png").read_bytes(), icons.render(kind, 128))


def test_icons_are_distinct_and_mostly_opaque_tiles():
    seen = set()
    for kind in icons.KINDS:
        width, height, rgba = pixels(icons.render(kind, 64))
        assert (width, height) == (64, 64)
        centre = rgba[(32 * 64 + 6) * 4:(32 * 64 + 7) * 4]  # inside the tile, left of the art
        assert centre[3] == 255
        seen.add(bytes(centre[:3]))
    assert len(seen) == len(icons.KINDS), "each kind has its own tile colour"



@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
def test_the_script_filter_command_runs_the_client_as_alfred_would(built: Path, daemon,
                                                                   tmp_path: Path):
    wf = tmp_path / "wf"
    plist = unpack(built, wf)
    sf = search_filter(plist)
    # Alfred's "/bin/zsh" language: zsh reading the script, the query as $1.
    out = subprocess.run(["zsh", "-c", sf["config"]["script"], "zsh", "postgres vac"],
                         cwd=wf, env=alfred_env(plist), capture_output=True, timeout=20)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["items"][0]["title"] == "Postgres vacuum"
    assert doc["items"][0]["variables"]["query"] == "postgres vac"
    # ... and the daemon remembers it for the stale-Enter guard.
    assert alfred_actions.latest_query() == "postgres vac"



def script_of(plist: dict, modifier: int) -> str:
    by_uid = {o["uid"]: o for o in plist["objects"]}
    sf = search_filter(plist)
    wire = next(w for w in plist["connections"][sf["uid"]] if w["modifiers"] == modifier)
    return by_uid[wire["destinationuid"]]["config"]["script"]


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
def test_action_script_runs_the_recorded_installation(built: Path, tmp_path: Path,
                                                      monkeypatch, home):
    stand = install_stand_ins(tmp_path, monkeypatch)
    inst = installation(tmp_path / "venv" / "bin", home)
    wf = tmp_path / "wf"
    plist = unpack(built, wf)
    env = alfred_env(plist, action="open", query="pg", note_id="notes:db/pg.md",
                     HOME=str(tmp_path), PATH=stand.env()["PATH"], STANDIN_LOG=str(stand.log))
    out = subprocess.run(["zsh", "-c", script_of(plist, 0), "zsh", "file:///n/db/pg.md"],
                         cwd=wf, env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert stand.args("open") == [["file:///n/db/pg.md"]]
    assert runs(inst) == ["alfred action open file:///n/db/pg.md"]


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
def test_after_a_python_upgrade_the_workflow_still_runs(tmp_path: Path, notes_config,
                                                        monkeypatch, home):
    """Built while notewell ran on one Python; then notewell is reinstalled on another
    (`pipx reinstall --python 3.13`, `brew upgrade python`): the old installation is gone
    and the home records the new one. The Script Filter still answers from zsh against
    the daemon, and from the new installation when the daemon is down."""
    old = installation(tmp_path / "py312" / "bin", home)
    subprocess.run([str(old / "notewell"), "alfred", "build"], env=subprocess_env(home),
                   capture_output=True, timeout=60, check=True)
    wf = tmp_path / "wf"
    plist = unpack(home / "alfred" / "notewell.alfredworkflow", wf)
    shutil.rmtree(tmp_path / "py312")
    d = start_daemon(home)
    try:
        wait_synced(d)
        new = installation(tmp_path / "py313" / "bin", home)  # after the daemon recorded its own
        sf = search_filter(plist)
        out = subprocess.run(["zsh", "-c", sf["config"]["script"], "zsh", "postgres vac"],
                             cwd=wf, env=alfred_env(plist, HOME=str(tmp_path)),
                             capture_output=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["items"][0]["title"] == "Postgres vacuum"
        assert runs(new) == []  # zsh answered by itself: no Python started
    finally:
        d.stop()
    out = subprocess.run(["zsh", "-c", sf["config"]["script"], "zsh", "postgres vac"],
                         cwd=wf, env=alfred_env(plist, HOME=str(tmp_path)),
                         capture_output=True, timeout=60)
    assert "not running" in json.loads(out.stdout)["items"][0]["title"], out.stderr
    assert runs(new) == ["alfred query postgres vac"]


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
def test_a_home_too_deep_for_a_socket_reaches_the_zsh_client(tmp_path: Path, monkeypatch,
                                                             notes_dir: Path):
    """The daemon listens under /tmp/notewell-UID/HASH (sun_path is 104 bytes on macOS);
    the workflow's zsh client finds it without Python."""
    deep = tmp_path / ("d" * 70) / "Library" / "Application Support" / "notewell"
    deep.mkdir(parents=True)
    monkeypatch.setenv("NOTEWELL_HOME", str(deep))
    assert paths.socket_path().startswith("/tmp/notewell-")
    config.save(config.Config(sources=(config.SourceConfig(
        "notes", "markdown", str(notes_dir), ("private/**",)),)))
    wf = tmp_path / "wf"
    plist = unpack(Path(alfred_workflow.build(str(tmp_path / "nw.alfredworkflow"))), wf)
    d = start_daemon(deep)
    try:
        wait_synced(d)
        (deep / "notewell-command").write_text('["/bin/false"]')  # Python would fail
        sf = search_filter(plist)
        out = subprocess.run(["zsh", "-c", sf["config"]["script"], "zsh", "lisbon tram"],
                             cwd=wf, env=alfred_env(plist, HOME=str(tmp_path)),
                             capture_output=True, timeout=30)
        assert json.loads(out.stdout)["items"][0]["title"] == "Lisbon weekend", out.stderr
    finally:
        d.stop()


# -- the actions, in process, with stand-in commands ---------------------------------------


def record_runner():
    calls: list[tuple[list[str], dict]] = []

    def run(cmd, **kw):
        calls.append((list(cmd), kw))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    return calls, run


def test_each_action_runs_the_right_command(home: Path, tmp_path: Path):
    calls, run = record_runner()
    spawned, spawn = record_runner()
    handle = alfred_actions.handle
    env = {"query": "q", "note_id": "notes:a.md"}
    newest = lambda: "q"  # noqa: E731  (not stale)
    handle(["open", "bear://x-callback-url/open-note?id=A"], env, run, spawn, newest=newest)
    handle(["reveal", "/n/a.md"], env, run, spawn, newest=newest)
    handle(["copy", "passage é"], env, run, spawn, newest=newest)
    handle(["quicklook", "/n/a.md"], env, run, spawn, newest=newest)
    assert [c[0] for c in calls] == [["open", "bear://x-callback-url/open-note?id=A"],
                                     ["open", "-R", "/n/a.md"], ["pbcopy"]]
    assert calls[2][1]["input"] == "passage é".encode()
    assert calls[2][1]["env"]["LANG"].endswith("UTF-8")
    assert spawned[0][0] == ["qlmanage", "-p", "/n/a.md"]
    assert spawned[0][1]["start_new_session"] is True
    # The item's own action wins over the connection's: a Bear note's ⌘ opens it.
    calls.clear()
    handle(["reveal", "bear://x"], dict(env, action="open"), run, spawn, newest=newest)
    assert calls[0][0] == ["open", "bear://x"]


def test_preview_writes_the_passage_to_a_private_file(home: Path):
    _, run = record_runner()
    spawned, spawn = record_runner()
    alfred_actions.handle(["quicklook", "# Bear passage"],
                          {"action": "preview", "note_id": "bear:ABC/1", "query": "q"},
                          run, spawn, newest=lambda: "q")
    cmd = spawned[0][0]
    assert cmd[:2] == ["qlmanage", "-p"]
    preview = Path(cmd[2])
    assert preview.read_text() == "# Bear passage" and preview.suffix == ".md"
    assert preview.parent.stat().st_mode & 0o077 == 0


def test_stale_item_is_not_opened_when_the_newest_query_ranks_another_note(home: Path):
    calls, run = record_runner()
    asked = []

    def top_result(note_id, query):
        asked.append((note_id, query))
        return False

    message = alfred_actions.handle(
        ["open", "file:///n/old.md"], {"query": "postg", "note_id": "notes:old.md",
                                       "alfred_workflow_bundleid": "com.notewell.alfred"},
        run, top_result=top_result, newest=lambda: "postgres backup")
    assert asked == [("notes:old.md", "postgres backup")]
    assert "stale" in message
    (cmd, _), = calls
    assert cmd[0] == "osascript" and "open" not in cmd
    assert cmd[-2:] == ["com.notewell.alfred", "postgres backup"]  # argv, not script text
    assert 'run trigger "search"' in " ".join(cmd)


def test_stale_item_is_opened_when_it_is_still_the_top_result(home: Path):
    calls, run = record_runner()
    alfred_actions.handle(["open", "file:///n/pg.md"],
                          {"query": "postg", "note_id": "notes:pg.md"}, run,
                          top_result=lambda note, q: note == "notes:pg.md",
                          newest=lambda: "postgres")
    assert [c[0] for c in calls] == [["open", "file:///n/pg.md"]]


def test_stale_guard_asks_the_real_daemon(daemon, home: Path):
    """The item was rendered for "banana"; the newest query is "postgres vacuum", whose
    top note is the Postgres one: the banana note must not open, the Postgres one may."""
    top = json.loads(run_client(home, "postgres vacuum").stdout)["items"][0]
    assert alfred_actions.latest_query() == "postgres vacuum"
    # The guard's own lookup (JSON format) does not count as a typed query.
    assert alfred_actions.still_top_result(top["uid"], "postgres vacuum")
    assert alfred_actions.latest_query() == "postgres vacuum"
    calls, run = record_runner()
    alfred_actions.handle(["open", "file:///banana.md"],
                          {"query": "banana", "note_id": "notes:kitchen/banana-bread.md"}, run)
    assert calls and calls[0][0][0] == "osascript"
    calls.clear()
    alfred_actions.handle(["open", top["arg"]], {"query": "postgres", "note_id": top["uid"]},
                          run)
    assert [c[0] for c in calls] == [["open", top["arg"]]]


def test_stale_guard_fails_safe_when_the_daemon_is_down(home: Path):
    assert alfred_actions.still_top_result("notes:a.md", "anything") is False


def test_start_item_starts_the_daemon_and_shows_alfred_again(home: Path):
    # The daemon-down item carries the query it was shown for ...
    item = json.loads(run_client(home, "lisbon").stdout)["items"][0]
    assert item["variables"] == {"action": "start", "query": "lisbon"}
    # ... and its action starts the daemon and shows Alfred again on that query.
    calls, run = record_runner()
    alfred_actions.handle(["open", item["arg"]],
                          {**item["variables"], "NOTEWELL_PYTHON": "/venv/bin/python",
                           "NOTEWELL_PYTHONPATH": "/src"}, run)
    (start_cmd, kw), (show_cmd, _) = calls
    assert start_cmd == ["/venv/bin/python", "-m", "notewell", "agent", "start"]
    assert kw["env"]["PYTHONPATH"] == "/src"
    assert show_cmd[0] == "osascript" and show_cmd[-1] == "lisbon"


def test_restart_item_stops_the_old_daemon_then_starts(daemon, home: Path):
    calls, run = record_runner()
    alfred_actions.handle(["open", "restart-daemon"], {"action": "restart"}, run)
    assert daemon.proc.wait(timeout=10) == 0  # a clean stop: launchd would leave it down
    assert not Path(paths.socket_path()).exists()
    assert calls[0][0][-3:] == ["notewell", "agent", "start"]


def test_stale_guard_proceeds_when_the_daemon_cannot_say(home: Path):
    """Daemon down: no newest query is known, so an item acts as rendered."""
    assert alfred_actions.latest_query() is None
    calls, run = record_runner()
    alfred_actions.handle(["open", "file:///n/a.md"], {"query": "a", "note_id": "notes:a.md"},
                          run)
    assert [c[0] for c in calls] == [["open", "file:///n/a.md"]]


def test_cli_alfred_install_builds_and_says_what_to_do_off_macos(home: Path, tmp_path: Path):
    out = tmp_path / "x.alfredworkflow"
    r = subprocess.run([sys.executable, "-m", "notewell", "alfred", "install", "--out",
                        str(out)], capture_output=True, text=True, env=subprocess_env(home),
                       timeout=60)
    assert out.exists() and zipfile.is_zipfile(out), r.stderr
    if sys.platform != "darwin":
        assert r.returncode == 1 and "macOS" in r.stdout


@pytest.mark.parametrize("query", ["-h", "--out x", "build"])
def test_the_cli_passes_the_workflows_query_through_untouched(home: Path, query: str):
    """`notewell alfred query` is the workflow's fallback: a query that looks like an option
    is still a query (argparse never sees it)."""
    out = subprocess.run([sys.executable, "-m", "notewell", "alfred", "query", query],
                         capture_output=True, env=subprocess_env(home, PYTHONPATH=str(
                             REPO / "daemon")), timeout=60)
    (item,) = json.loads(out.stdout)["items"]
    assert "not running" in item["title"] and item["variables"]["query"] == query


def test_doctor_flags_only_a_workflow_that_cannot_follow_upgrades(home: Path, monkeypatch):
    """A workflow of another version is fine: its copy of the zsh client hands over to the
    daemon's. One built before it did so sends keystrokes to Python after an upgrade:
    doctor says to rebuild it, once."""
    from notewell.ops import doctor

    alfred_workflow.build()
    assert doctor.check_workflow("darwin").status == doctor.OK
    monkeypatch.setattr(alfred_workflow, "__version__", "0.0.9")
    alfred_workflow.build()
    check = doctor.check_workflow("darwin")
    assert check.status == doctor.OK and "0.0.9" in check.detail, check
    own = alfred_workflow.script_bytes
    # The copy a workflow built before the record existed carried: no hand-over.
    monkeypatch.setattr(alfred_workflow, "script_bytes", lambda name: own(name).replace(
        b"/notewell-client", b"/not-read") if name == alfred_workflow.ZSH_CLIENT else own(name))
    alfred_workflow.build()
    check = doctor.check_workflow("darwin")
    assert check.status == doctor.FAIL and "built by notewell 0.0.9" in check.detail
    assert "notewell alfred install" in check.fix


# -- after an upgrade of notewell: the workflow's copy hands over to the daemon's client --------


def stamp(wf: Path, version: str) -> None:
    """Make the workflow's copy of the zsh client another version's, as one built before an
    upgrade of notewell is."""
    client = wf / alfred_workflow.ZSH_CLIENT
    text = re.sub(r"(?m)^typeset -g _notewell_version=.*$",
                  f"typeset -g _notewell_version={version}", client.read_text())
    assert f"_notewell_version={version}\n" in text
    client.write_text(text)


def no_python_path(tmp_path: Path) -> str:
    """A PATH whose python3 and python only log that they ran (to ``python-ran``) and
    fail: with the recorded installation's log, proof that no Python started."""
    bin_dir, log = tmp_path / "no-python", tmp_path / "python-ran"
    bin_dir.mkdir(exist_ok=True)
    for name in ("python3", "python"):
        (bin_dir / name).write_text(f'#!/bin/sh\necho "$0 $@" >> {shlex.quote(str(log))}\n'
                                    "exit 1\n")
        (bin_dir / name).chmod(0o755)
    return f"{bin_dir}:/usr/bin:/bin"


def keystroke(wf: Path, plist: dict, query: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """The Script Filter run as Alfred runs it."""
    sf = search_filter(plist)
    env = alfred_env(plist, HOME=str(tmp_path), PATH=no_python_path(tmp_path))
    return subprocess.run(["zsh", "-c", sf["config"]["script"], "zsh", query], cwd=wf,
                          env=env, capture_output=True, timeout=60)


def answered_by_zsh(out: subprocess.CompletedProcess, inst: Path, tmp_path: Path) -> bool:
    assert out.returncode == 0 and out.stderr == b"", out.stderr
    assert json.loads(out.stdout)["items"][0]["title"] == "Postgres vacuum", out.stdout
    return runs(inst) == [] and not (tmp_path / "python-ran").exists()


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
def test_an_older_workflow_answers_from_zsh_through_the_daemons_client(built: Path, daemon,
                                                                       tmp_path: Path, home):
    """Built by an older notewell; the daemon is this version's. The old copy hands the
    keystroke to the client the daemon recorded (this package's), which answers in zsh;
    its actions run through it too."""
    assert (home / "notewell-client").read_text() == \
        os.path.realpath(SCRIPTS / alfred_workflow.ZSH_CLIENT)
    wf = tmp_path / "wf"
    plist = unpack(built, wf)
    stamp(wf, "0.0.9")
    inst = installation(tmp_path / "venv" / "bin", home)
    assert answered_by_zsh(keystroke(wf, plist, "postgres vac", tmp_path), inst, tmp_path)
    assert alfred_actions.latest_query() == "postgres vac"
    out = subprocess.run(["zsh", "-c", script_of(plist, SHIFT), "zsh", "file:///n/db/pg.md"],
                         cwd=wf, env=alfred_env(plist, action="quicklook", query="pg",
                                                note_id="notes:db/pg.md", HOME=str(tmp_path),
                                                PATH=no_python_path(tmp_path)),
                         capture_output=True, text=True, timeout=60)
    assert runs(inst) == ["alfred action quicklook file:///n/db/pg.md"], out.stderr


def test_an_installation_without_its_zsh_client_removes_the_record(home: Path):
    paths.record_client("/opt/nw/scripts/notewell-query.zsh")
    assert (home / "notewell-client").read_bytes() == b"/opt/nw/scripts/notewell-query.zsh"
    paths.record_client(None)
    assert not (home / "notewell-client").exists()
    paths.record_client(None)  # nothing to remove: fine


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
@pytest.mark.parametrize("record", ["missing", "gone", "relative", "folder"])
def test_a_stale_client_record_leaves_the_workflow_to_its_own_copy(built: Path, daemon,
                                                                   tmp_path: Path, home,
                                                                   record: str):
    """No record, or one naming a client that is gone (its installation removed by a
    Python upgrade before the new daemon started) or is not a file: the workflow's copy
    answers by itself when it is the daemon's version, and through the recorded
    installation when it is not."""
    target = {"missing": None, "gone": str(tmp_path / "py312" / "notewell-query.zsh"),
              "relative": alfred_workflow.ZSH_RUN, "folder": str(tmp_path)}[record]
    if target is None:
        (home / "notewell-client").unlink()
    else:
        (home / "notewell-client").write_text(target)
    wf = tmp_path / "wf"
    plist = unpack(built, wf)
    inst = installation(tmp_path / "venv" / "bin", home)
    assert answered_by_zsh(keystroke(wf, plist, "postgres vac", tmp_path), inst, tmp_path)
    stamp(wf, "0.0.9")
    out = keystroke(wf, plist, "postgres vac", tmp_path)
    assert out.stderr == b"" and runs(inst) == ["alfred query postgres vac"]
    assert json.loads(out.stdout)["items"][0]["title"] == "Postgres vacuum"


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
def test_a_recorded_client_path_with_spaces_quotes_and_non_ascii(built: Path, daemon,
                                                                  tmp_path: Path, home):
    where = tmp_path / "it's \"my\" $HOME" / "Ünïcødé 名前 (x)" / "scripts"
    where.mkdir(parents=True)
    for name in (alfred_workflow.ZSH_CLIENT, alfred_workflow.ZSH_RUN,
                 alfred_workflow.PYTHON_CLIENT):
        shutil.copy(SCRIPTS / name, where)
    paths.record_client(str(where / alfred_workflow.ZSH_CLIENT))
    wf = tmp_path / "wf"
    plist = unpack(built, wf)
    stamp(wf, "0.0.9")  # only the recorded client can answer from zsh
    inst = installation(tmp_path / "venv" / "bin", home)
    assert answered_by_zsh(keystroke(wf, plist, "postgres vac", tmp_path), inst, tmp_path)


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")
def test_the_recorded_client_falls_back_to_the_recorded_installation(built: Path, tmp_path,
                                                                     notes_config, home):
    """The daemon is down: the client it recorded, run by the workflow, says so through
    `notewell alfred query` of the installation the home records, as the workflow's own
    copy would (not through a Python of its own, which a Python upgrade may have
    removed)."""
    d = start_daemon(home)
    d.stop()
    assert (home / "notewell-client").exists()
    wf = tmp_path / "wf"
    plist = unpack(built, wf)
    stamp(wf, "0.0.9")
    inst = installation(tmp_path / "venv" / "bin", home)
    out = keystroke(wf, plist, "postgres vac", tmp_path)
    assert "not running" in json.loads(out.stdout)["items"][0]["title"], out.stderr
    assert runs(inst) == ["alfred query postgres vac"]
    assert not (tmp_path / "python-ran").exists()
