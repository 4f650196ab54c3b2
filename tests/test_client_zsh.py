"""The zsh client (notewell/launcher/scripts/notewell-query.zsh): the same request as the
Python client, the daemon's JSON printed byte for byte, the socket the daemon recorded, and
every other case handed to the Python client (beside the package's copy) or to the notewell
recorded in the home (the Alfred workflow's copy)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import msgpack
import pytest
from helpers import CLIENT, REPO, SCRIPTS, FakeListener, run_client, subprocess_env
from launcher_helpers import ZSH_CLIENT, run_zsh
from notewell import __version__
from notewell.wire import client, messages, paths, protocol

pytestmark = pytest.mark.skipif(not shutil.which("zsh"), reason="zsh is not installed")



def fell_back(out: subprocess.CompletedProcess, *query: str) -> bool:
    text = out.stdout.decode("utf-8", "replace")
    return text == "".join(f"FALLBACK {a}|" for a in ("-IS", str(CLIENT), *query))


class FakeDaemon:
    """Listens where a daemon would; answers each request with ``reply`` (raw frame bytes)
    and records what it was sent."""

    def __init__(self, path: str, reply: bytes | None) -> None:
        for folder in paths.socket_chain(path):  # as a daemon makes them: clients check
            Path(folder).mkdir(parents=True, exist_ok=True)
            Path(folder).chmod(0o700)
        self.reply, self.requests = reply, []
        self.listener = FakeListener(path, self._answer)

    def _answer(self, conn: socket.socket) -> None:
        self.requests.append(protocol.read_frame(conn, protocol.MAX_REQUEST_BYTES))
        if self.reply is not None:
            conn.sendall(self.reply)

    def close(self) -> None:
        self.listener.close()


def ok_frame(json_text: str) -> bytes:
    return protocol.frame(msgpack.packb({"ok": True, "result": {"alfred": json_text}}))


# -- against a real daemon --------------------------------------------------------------------

QUERIES = ["postgres vacuum", "héllo wörld ☃", "", 'a"b\\c $HOME `x` *', "x" * 300,
           "tab\there", "two\nlines", "ünïcode " * 40, "#recipes in:notes bread"]


def test_prints_what_the_python_client_prints(daemon, home, marker):
    # NOTEWELL_PYTHON is the marker: a byte-equal answer cannot have come from Python.
    env = subprocess_env(home, NOTEWELL_PYTHON=str(marker))
    for query in QUERIES:
        want = run_client(home, query)
        got = run_zsh(env, query)
        assert got.returncode == 0 and got.stderr == b""
        assert got.stdout == want.stdout, query
        assert b"FALLBACK" not in got.stdout


def test_words_are_joined_like_the_python_client_does(daemon, home, marker):
    env = subprocess_env(home, NOTEWELL_PYTHON=str(marker))
    assert run_zsh(env, "postgres", "vacuum").stdout == run_client(home, "postgres vacuum").stdout


def test_the_daemon_remembers_the_query_for_the_stale_enter_guard(daemon, home, marker):
    run_zsh(subprocess_env(home, NOTEWELL_PYTHON=str(marker)), "lisbon tram")
    assert daemon.ask("latest_query")["result"]["query"] == "lisbon tram"


def test_daemon_down_falls_back_to_the_python_client(home):
    env = subprocess_env(home, NOTEWELL_PYTHON=sys.executable)
    got = run_zsh(env, "anything")
    assert got.returncode == 0 and got.stdout == run_client(home, "anything").stdout
    assert b"not running" in got.stdout


def test_default_fallback_is_the_checkout_python_client(home):
    env = {k: v for k, v in subprocess_env(home).items() if k != "NOTEWELL_PYTHON"}
    got = run_zsh(env, "anything")
    assert b"not running" in got.stdout, got.stderr


# -- against a stand-in daemon ----------------------------------------------------------------


@pytest.fixture
def short_home(monkeypatch):
    # Socket paths must fit in 103 bytes: pytest's tmp_path can be too deep.
    with tempfile.TemporaryDirectory(prefix="nwz-", dir="/tmp") as d:
        monkeypatch.setenv("NOTEWELL_HOME", d)
        yield Path(d)


def fake_daemon(home: Path, reply: bytes | None) -> FakeDaemon:
    # The record a daemon writes when it listens (paths.record_socket).
    (home / "notewell-socket").write_text(str(home / "run" / "notewell.sock"))
    return FakeDaemon(str(home / "run" / "notewell.sock"), reply)


def test_request_is_the_python_clients_request_byte_for_byte(short_home, marker):
    d = fake_daemon(short_home, ok_frame('{"items":[]}'))
    try:
        env = {"NOTEWELL_HOME": str(short_home), "NOTEWELL_PYTHON": str(marker)}
        for query in ["", "abc", "é" * 20, "x" * 31, "x" * 32, "x" * 255, "x" * 256,
                      "ü" * 3000]:
            assert run_zsh(env, query).stdout == b'{"items":[]}'
            want = protocol.packb(client.search_request(query))
            assert d.requests[-1] == want, len(query)
    finally:
        d.close()


@pytest.mark.parametrize("size", [0, 5, 31, 32, 255, 256, 70_000])
def test_every_msgpack_string_size_is_read(short_home, marker, size):
    text = '{"items":[{"title":"' + "t" * size + '"}]}'
    d = fake_daemon(short_home, ok_frame(text))
    try:
        got = run_zsh({"NOTEWELL_HOME": str(short_home), "NOTEWELL_PYTHON": str(marker)}, "q")
        assert got.stdout == text.encode()
    finally:
        d.close()


@pytest.mark.parametrize("reply", [
    protocol.frame(msgpack.packb({"ok": False, "error": {"code": "warming_up",
                                                         "message": "loading"}})),
    protocol.frame(msgpack.packb({"ok": True, "result": {"alfred": 5}})),
    protocol.frame(msgpack.packb({"ok": True, "result": {"hits": []}})),
    ok_frame('{"items":[]}')[:-3],  # cut short
    protocol.frame(b"\x82\xa2ok\xc3\xa6result\x81\xa6alfred\xa5abc"),  # length disagrees
    b"\x00\x00",
    b"",
    None,  # closes without a word
], ids=["error", "not-a-string", "other-result", "truncated", "bad-length", "half-header",
        "empty", "silent"])
def test_anything_but_a_ready_answer_goes_to_the_python_client(short_home, marker, reply):
    d = fake_daemon(short_home, reply)
    try:
        got = run_zsh({"NOTEWELL_HOME": str(short_home), "NOTEWELL_PYTHON": str(marker)},
                      "some", "words")
        assert fell_back(got, "some", "words"), got.stdout
    finally:
        d.close()


def test_a_query_too_long_for_one_request_goes_to_python(short_home, marker):
    d = fake_daemon(short_home, ok_frame("{}"))
    try:
        got = run_zsh({"NOTEWELL_HOME": str(short_home), "NOTEWELL_PYTHON": str(marker)},
                      "y" * 70_000)
        assert fell_back(got, "y" * 70_000) and d.requests == []
    finally:
        d.close()


def record_socket(env: dict[str, str]) -> str:
    """What a daemon does when it listens: write its socket path into its home."""
    code = "from notewell.wire import paths; paths.record_socket(); print(paths.socket_path())"
    return subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(
        REPO / "daemon")}, capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize("case", ["home", "home-dots", "home-tilde", "xdg-runtime",
                                  "xdg-data", "plain", "long-home"])
def test_the_socket_the_daemon_recorded_is_found(case, marker):
    with tempfile.TemporaryDirectory(prefix="nwz-", dir="/tmp") as d:
        env = {"HOME": f"{d}/u", "NOTEWELL_PYTHON": str(marker)}
        env.update({
            "home": {"NOTEWELL_HOME": f"{d}/h/"},
            "home-dots": {"NOTEWELL_HOME": f"{d}/x/../h/./"},
            "home-tilde": {"NOTEWELL_HOME": "~/nw"},
            "xdg-runtime": {"XDG_RUNTIME_DIR": f"{d}/r//"},
            "xdg-data": {"XDG_DATA_HOME": f"{d}/data/"},
            "plain": {},
            # Too deep for sun_path: the daemon listens under /tmp/notewell-UID/HASH.
            "long-home": {"NOTEWELL_HOME": f"{d}/{'d' * 60}/Application Support/notewell"},
        }[case])
        path = record_socket(env)
        assert path.startswith("/tmp/notewell-" if case == "long-home" else d)
        fake = FakeDaemon(path, ok_frame('{"items":[{"title":"found"}]}'))
        try:
            assert run_zsh(env, "q").stdout == b'{"items":[{"title":"found"}]}'
        finally:
            fake.close()
            shutil.rmtree(Path(path).parent, ignore_errors=True)


def test_without_a_recorded_socket_python_answers(short_home, marker):
    d = fake_daemon(short_home, ok_frame('{"items":[]}'))
    try:
        (short_home / "notewell-socket").unlink()
        got = run_zsh({"NOTEWELL_HOME": str(short_home), "NOTEWELL_PYTHON": str(marker)}, "q")
        assert fell_back(got, "q") and d.requests == []
    finally:
        d.close()


# -- the Alfred workflow's copy: no Python client beside it ------------------------------


@pytest.fixture
def workflow_copy(tmp_path: Path) -> Path:
    wf = tmp_path / "wf"
    wf.mkdir()
    shutil.copy(ZSH_CLIENT, wf / "notewell-query.zsh")
    shutil.copy(SCRIPTS / "notewell-run.zsh", wf / "notewell-run.zsh")
    return wf / "notewell-query.zsh"


def recorded_install(home: Path, where: Path) -> Path:
    """A stand-in installation at ``where`` (its path has a space, quotes, non-ASCII), as
    `notewell serve` records it: it says it was run, and with what."""
    where.mkdir(parents=True)
    program = where / "notewell"
    program.write_text('#!/bin/sh\nprintf "RECORDED %s|" "$@"\n')
    program.chmod(0o755)
    (home / "notewell-command").write_text(json.dumps([str(program)]) + "\n")
    return program


def test_the_workflow_copy_falls_back_to_the_recorded_installation(short_home, workflow_copy,
                                                                   tmp_path):
    recorded_install(short_home, tmp_path / 'José "pipx" \\ venv😀' / "bin")
    env = {"NOTEWELL_HOME": str(short_home), "HOME": str(tmp_path)}
    got = run_zsh_file(workflow_copy, env, "some words")  # no daemon
    assert got.stdout.decode() == "RECORDED alfred|RECORDED query|RECORDED some words|", got
    # An action of the workflow's Run Script objects goes the same way.
    got = run_zsh_file(workflow_copy, env, "--alfred-action", "open", "file:///n/a.md")
    assert got.stdout.decode() == ("RECORDED alfred|RECORDED action|RECORDED open|"
                                   "RECORDED file:///n/a.md|")


@pytest.mark.parametrize("record", [None, '["/nowhere/bin/notewell"]', "not json", "[]"])
def test_the_workflow_copy_says_what_to_do_without_a_usable_installation(
        short_home, workflow_copy, tmp_path, record):
    if record is not None:
        (short_home / "notewell-command").write_text(record)
    env = {"NOTEWELL_HOME": str(short_home), "HOME": str(tmp_path)}
    got = run_zsh_file(workflow_copy, env, "q")
    (item,) = json.loads(got.stdout)["items"]
    assert "installation" in item["title"] and "notewell agent install" in item["subtitle"]
    # The zsh literal is the one writer's output, byte for byte.
    assert got.stdout == messages.message_feedback(*messages.INSTALLATION_MISSING).encode()


def test_an_installation_that_runs_and_fails_is_not_called_missing(short_home, workflow_copy,
                                                                   tmp_path):
    """The "start it" action or a query through an installation that crashes (a broken
    package, a Python error) sends the user to doctor, not to reinstall."""
    program = recorded_install(short_home, tmp_path / "bin")
    program.write_text("#!/bin/sh\necho 'Traceback (most recent call last):' >&2\nexit 1\n")
    env = {"NOTEWELL_HOME": str(short_home), "HOME": str(tmp_path)}
    got = run_zsh_file(workflow_copy, env, "q")
    assert got.stdout == messages.message_feedback(*messages.INSTALLATION_FAILED).encode()
    got = run_zsh_file(workflow_copy, env, "--alfred-action", "start", "q")
    assert b"failed" in got.stderr and b"notewell doctor" in got.stderr
    assert b"missing" not in got.stderr


def test_sourced_by_a_zsh_that_read_a_hostile_zshenv(short_home, marker, tmp_path):
    # Alfred's /bin/zsh reads ~/.zshenv before it sources the client: options and aliases
    # from there must not change how the client parses or what it prints.
    zdot = tmp_path / "zdot"
    zdot.mkdir()
    (zdot / ".zshenv").write_text("setopt ignore_braces ksh_arrays sh_word_split no_unset\n"
                                  "alias print='echo hijacked' exec='echo hijacked'\n")
    d = fake_daemon(short_home, ok_frame('{"items":[{"title":"found"}]}'))
    try:
        out = subprocess.run(
            ["zsh", "-c", f'source {ZSH_CLIENT} "$1"', "zsh", "some words"],
            env={"NOTEWELL_HOME": str(short_home), "NOTEWELL_PYTHON": str(marker),
                 "ZDOTDIR": str(zdot), "HOME": str(tmp_path)},
            capture_output=True, timeout=10, check=False)
        assert out.stdout == b'{"items":[{"title":"found"}]}', out.stderr
    finally:
        d.close()


def test_a_daemon_that_hangs_up_before_reading_means_the_fallback(short_home, marker):
    path = short_home / "run" / "notewell.sock"
    path.parent.mkdir(parents=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)

    def hang_up() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    try:
        query = "p" * 50_000  # more than the socket takes before the peer has closed
        got = run_zsh({"NOTEWELL_HOME": str(short_home), "NOTEWELL_PYTHON": str(marker)},
                      query)
        assert got.returncode == 0 and fell_back(got, query), (got.returncode, got.stderr)
    finally:
        listener.close()


def test_the_zsh_client_carries_this_packages_version():
    # The daemon compares it with its own (a daemon older than its installation restarts).
    (line,) = [x for x in ZSH_CLIENT.read_text().splitlines()
               if x.startswith("typeset -g _notewell_version=")]
    assert line.split("=", 1)[1] == __version__, (
        "bump _notewell_version in notewell-query.zsh with notewell.__version__")
    assert client.search_request("q")["notewell"] == __version__


def test_default_fallback_of_an_installed_package_is_its_virtualenvs_python(tmp_path, home):
    # <venv>/lib/pythonX.Y/site-packages/notewell/launcher/scripts: no checkout .venv above.
    venv = tmp_path / "venv"
    scripts = venv / "lib" / "python3.x" / "site-packages" / "notewell" / "launcher" / "scripts"
    scripts.mkdir(parents=True)
    (scripts / "notewell-query.zsh").write_text(ZSH_CLIENT.read_text())
    (scripts / "notewell-query").write_text(CLIENT.read_text())
    (venv / "bin").mkdir()
    (venv / "bin" / "python").write_text('#!/bin/sh\nprintf "VENV %s|" "$@"\n')
    (venv / "bin" / "python").chmod(0o755)
    env = {k: v for k, v in subprocess_env(home).items() if k != "NOTEWELL_PYTHON"}
    got = run_zsh_file(scripts / "notewell-query.zsh", env, "q")
    want = f"VENV -IS|VENV {scripts / 'notewell-query'}|VENV q|"
    assert got.stdout.decode() == want, got.stderr


def run_zsh_file(path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["zsh", "-f", str(path), *args], capture_output=True, env=env,
                          timeout=10, check=False)


# -- the contract with the daemon: the reply's first bytes ------------------------------------


def test_the_daemons_own_reply_is_what_the_zsh_client_takes(daemon, home, marker):
    """The zsh client recognises an answer by its exact first bytes (``{"ok": true,
    "result": {"alfred": ...}}`` as msgpack). The daemon's real frame for a keystroke,
    replayed to it, is printed as is; a daemon whose reply gains a key (or loses one)
    without the zsh client changing sends every keystroke to Python, and fails here."""
    sock = client.connect(paths.socket_path(), 5)
    try:
        sock.sendall(protocol.frame(protocol.packb(client.search_request("banana"))))
        body = protocol.read_frame(sock, protocol.MAX_REPLY_BYTES)
    finally:
        sock.close()
    reply = msgpack.unpackb(body)
    alfred = reply["result"]["alfred"]
    assert "Banana bread" in alfred
    shapes = {
        "as sent": (body, True),
        "a key more": (msgpack.packb({**reply, "took_ms": 3}), False),
        "a result key more": (msgpack.packb({"ok": True, "result": {
            "alfred": alfred, "hits": []}}), False),
        "keys reordered": (msgpack.packb({"result": reply["result"], "ok": True}), False),
    }
    with tempfile.TemporaryDirectory(prefix="nwz-", dir="/tmp") as d:
        replay_home = Path(d)
        env = {"NOTEWELL_HOME": d, "NOTEWELL_PYTHON": str(marker)}
        for name, (frame_body, taken) in shapes.items():
            fake = fake_daemon(replay_home, protocol.frame(frame_body))
            try:
                got = run_zsh(env, "banana")
            finally:
                fake.close()
                (replay_home / "run" / "notewell.sock").unlink()
            if taken:
                assert got.stdout == alfred.encode(), name
            else:
                assert fell_back(got, "banana"), name
