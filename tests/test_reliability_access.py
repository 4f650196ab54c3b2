"""Who may talk to the daemon, and what it may reach: private socket from its first
moment, peer credentials checked on every connection, a lock rather than a guess, no
network at run time, and no note text or query in the log unless asked for."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest
from helpers import (
    REPO,
    notewell_command,
    run_client,
    start_daemon,
    subprocess_env,
    wait_synced,
    write_notes,
)
from notewell import config
from notewell.serve import transport
from notewell.wire import paths, protocol
from reliability_helpers import ask, connect, inproc_daemon, read_reply


def test_socket_is_0600_by_umask_not_by_a_later_chmod(home, monkeypatch):
    # With chmod disabled, only the umask in force at bind() can make the socket private:
    # there is no moment at which another user could connect to a wider one.
    paths.ensure_private_dir(paths.runtime_dir())
    monkeypatch.setattr(transport.os, "chmod", lambda *a, **k: None)
    sock = transport.bind_socket(paths.socket_path())
    try:
        mode = stat.S_IMODE(os.stat(paths.socket_path()).st_mode)
        assert mode == 0o600, oct(mode)
    finally:
        sock.close()
    assert os.umask(0o022) == 0o022  # the process umask is restored afterwards


def test_runtime_dir_is_created_private_and_a_wide_one_is_narrowed(tmp_path):
    fresh = tmp_path / "a" / "b" / "run"
    old = os.umask(0)  # the most permissive umask a launcher could leave us
    try:
        paths.ensure_private_dir(str(fresh))
    finally:
        os.umask(old)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o700
    wide = tmp_path / "wide"
    wide.mkdir()
    wide.chmod(0o777)
    paths.ensure_private_dir(str(wide))
    assert stat.S_IMODE(wide.stat().st_mode) == 0o700


def test_connections_from_another_uid_are_closed_unanswered(home, notes_dir, monkeypatch):
    cfg = config.Config(sources=(config.SourceConfig("notes", "markdown", str(notes_dir)),))
    with inproc_daemon(cfg):
        assert ask("ping")["ok"]
        for uid in (os.getuid() + 1, -1, None):  # another user; kernel refused; unknown OS
            with monkeypatch.context() as patch:
                patch.setattr(transport, "peer_uid", lambda conn, uid=uid: uid)
                s = connect()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    s.sendall(protocol.frame(protocol.packb(protocol.request("ping"))))
                assert read_reply(s) is None, f"answered a peer with uid {uid}"
                s.close()
        assert ask("ping")["ok"]


@pytest.mark.skipif(os.getuid() != 0 or not hasattr(os, "fork"),
                    reason="needs root to become another user")
def test_another_real_user_is_refused_by_the_kernel_check(daemon):
    """A process running as `nobody` is stopped by the 0700/0600 modes; with the modes
    deliberately widened, it is still refused by the SO_PEERCRED check."""
    run_dir = paths.runtime_dir()

    def as_nobody() -> str:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: become nobody, then try to talk to the daemon
            os.close(r)
            try:
                os.chdir(run_dir)  # as root; a relative path then needs no parent access
                os.setgid(65534)
                os.setuid(65534)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(5)
                try:
                    s.connect("notewell.sock")
                except PermissionError:
                    result = "denied"
                else:
                    try:
                        s.sendall(protocol.frame(protocol.packb(protocol.request("ping"))))
                        result = "answered" if s.recv(64) else "closed"
                    except (BrokenPipeError, ConnectionResetError):
                        result = "closed"
            except BaseException as e:
                result = f"error {type(e).__name__}: {e}"
            os.write(w, result.encode())
            os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        out = os.read(r, 200).decode()
        os.close(r)
        return out

    assert as_nobody() == "denied"
    sock = paths.socket_path()
    os.chmod(run_dir, 0o711)
    os.chmod(sock, 0o666)
    try:
        assert as_nobody() == "closed"
    finally:
        os.chmod(sock, 0o600)
        os.chmod(run_dir, 0o700)
    assert "refused a connection from uid 65534" in daemon.log.read_text()
    assert daemon.ask("ping")["ok"]


def test_a_daemon_killed_with_sigkill_leaves_nothing_that_blocks_the_next(home, notes_config):
    first = start_daemon(home)
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(timeout=10)
    assert os.path.exists(paths.socket_path())  # the crash left its socket behind
    second = start_daemon(home)  # the flock died with the process; the socket is replaced
    try:
        wait_synced(second)
        assert second.ask("search", query="banana")["result"]["hits"]
    finally:
        assert second.stop() == 0


# -- no network --------------------------------------------------------------------------

SITECUSTOMIZE = '''
import os, sys, _socket

_LOG = os.environ["NOTEWELL_NET_LOG"]
_BLOCKED = {_socket.AF_INET, _socket.AF_INET6}
with open(_LOG + ".armed", "a") as f:
    f.write(f"{os.getpid()} {' '.join(sys.argv)}\\n")


def _hook(event, args):
    bad = ((event == "socket.__new__" and args[1] in _BLOCKED)
           or (event in ("socket.connect", "socket.sendto", "socket.bind")
               and isinstance(args[1], tuple))
           or event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
                        "urllib.Request", "http.client.connect"))
    if bad:
        with open(_LOG, "a") as f:
            f.write(f"{os.getpid()} {event} {args[1:]!r}\\n")
        raise PermissionError(f"network blocked by the test: {event}")


sys.addaudithook(_hook)
'''


def _unshare() -> list[str]:
    """``unshare -n`` (a network namespace with no interfaces) when we may use it."""
    tool = shutil.which("unshare")
    if tool and subprocess.run([tool, "-n", "true"], capture_output=True).returncode == 0:
        return [tool, "-n"]
    return []


def test_no_network_while_indexing_syncing_and_serving_with_the_real_model(home, tmp_path):
    """Every Python process notewell starts runs with an audit hook that records and
    refuses any AF_INET/AF_INET6 socket, connect or name lookup, and (where permitted)
    inside a network namespace with no interfaces at all. Everything still works, and
    nothing even tried."""
    hook_dir = tmp_path / "nonet"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
    net_log = tmp_path / "net.log"
    notes = write_notes(tmp_path / "notes", {
        "kitchen/banana-bread.md": "# Banana bread\n\nThree ripe bananas, flour, sugar and "
        "butter; bake for an hour.\n",
        "db/postgres.md": "# Postgres vacuum\n\nRun VACUUM ANALYZE after a bulk delete.\n",
    })
    cfg = config.Config(sources=(config.SourceConfig("notes", "markdown", str(notes)),))
    config.save(cfg)
    env = subprocess_env(home, NOTEWELL_NET_LOG=str(net_log))
    env["PYTHONPATH"] = f"{hook_dir}{os.pathsep}{REPO / 'daemon'}"
    jail = _unshare()
    cmd = [*jail, sys.executable, "-m", "notewell"]

    # the hook works: a plain connection attempt is recorded and refused
    probe = subprocess.run([*jail, sys.executable, "-c",
                            "import socket; socket.create_connection(('127.0.0.1', 9), 1)"],
                           env=env, capture_output=True, timeout=30)
    assert probe.returncode != 0 and b"network blocked" in probe.stderr
    assert "socket" in net_log.read_text()
    net_log.unlink()

    index = subprocess.run([*cmd, "index", "--quiet"], env=env, capture_output=True,
                           timeout=120)
    assert index.returncode == 0, index.stderr.decode()[-2000:]
    log = home / "serve.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([*cmd, "serve", "--poll", "0.5"], env=env, stdout=f,
                                stderr=f)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if ask("ping", timeout=2)["result"]["state"] == "ready":
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        out = json.loads(run_client(home, "loaf", "made", "from", "bananas").stdout)
        assert out["items"][0]["uid"] == "notes:kitchen/banana-bread.md"
        (notes / "sport").mkdir()
        (notes / "sport" / "kayak.md").write_text("# Kayak trip\n\nPaddling across the "
                                                  "fjord at dawn in a sea kayak.\n")
        sync = subprocess.run([*cmd, "sync", "--json"], env=env, capture_output=True,
                              timeout=120)
        assert sync.returncode == 0, sync.stderr.decode()
        # Not ``added == 1``: the daemon's watcher may index the note first. That it is
        # indexed, by either, the search below shows.
        assert json.loads(sync.stdout)[0]["deleted"] == 0
        found = subprocess.run([*cmd, "search", "boat", "on", "the", "water", "--json"],
                               env=env, capture_output=True, timeout=60)
        assert json.loads(found.stdout)[0]["note_id"] == "notes:sport/kayak.md"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert proc.returncode == 0, log.read_text()[-2000:]
    armed = (tmp_path / "net.log.armed").read_text()
    assert armed.count(" serve") == 1 and " index" in armed and " sync" in armed
    assert not net_log.exists(), net_log.read_text()
    print(f"no-network run: hook armed in {len(armed.splitlines())} processes, "
          f"namespace: {'unshare -n' if jail else 'none (audit hook only)'}")


# -- logs ------------------------------------------------------------------------------------

SECRET_NOTE = "# Quokka ledger\n\nThe quokka ledger holds the wombat cipher zanzibarite.\n"


@pytest.mark.parametrize("debug_log", [False, True])
def test_logs_hold_no_note_text_or_query_unless_debug_log(home, tmp_path, debug_log):
    notes = write_notes(tmp_path / "notes", {
        "secret.md": SECRET_NOTE,
        "broken.md": "\x00binary\x00zanzibarite",  # a warning names the file, not the text
    })
    cfg = config.Config(sources=(config.SourceConfig("notes", "markdown", str(notes)),),
                        debug_log=debug_log)
    config.save(cfg)
    d = start_daemon(home, poll=0.2)
    try:
        wait_synced(d)
        hits = d.ask("search", query="quokka wombat cipher")["result"]["hits"]
        assert hits[0]["title"] == "Quokka ledger"
        run_client(home, "zanzibarite", "ledger")
        d.ask("search", query="zanzibarite", limit="many")  # a bad request
        d.ask("similar", note_id="notes:secret.md")
        (notes / "secret.md").write_text(SECRET_NOTE + "\nMarmalade quokka addendum.\n")
        assert d.ask("sync_now")["ok"]
    finally:
        assert d.stop() == 0
    text = d.log.read_text()
    assert "broken.md" in text  # the log is being written
    private = ("zanzibarite", "quokka", "wombat", "Marmalade", "cipher")
    leaked = [w for w in private if w.lower() in text.lower()]
    if debug_log:
        assert "quokka wombat cipher" in text  # the test would see a leak
    else:
        assert not leaked, text


def test_a_failing_request_logs_where_it_failed_but_not_the_query(home, notes_dir, caplog,
                                                                   monkeypatch):
    from notewell.engine import ReadView

    cfg = config.Config(sources=(config.SourceConfig("notes", "markdown", str(notes_dir)),))
    with inproc_daemon(cfg):
        def explode(self, query, *args, **_):
            raise RuntimeError(f"fts5: syntax error near {query!r}")  # as SQLite words it

        monkeypatch.setattr(ReadView, "search", explode)  # the request's view searches
        reply = ask("search", query="zanzibarite ledger")
    assert reply["error"]["code"] == "internal"
    assert "zanzibarite" in reply["error"]["message"]  # the owner's client is told
    logged = caplog.text
    assert "op search failed: RuntimeError" in logged and "explode" in logged
    assert "zanzibarite" not in logged


def test_a_socket_folder_another_user_could_swap_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # like /tmp without its sticky bit
    with pytest.raises(PermissionError, match="writable by every user"):
        transport.check_parent(str(shared / "run"))
    # The runtime folder in a shared $XDG_RUNTIME_DIR (a home of ours left that wide is
    # narrowed to 0700 instead: tests/test_private_files.py).
    env = {k: v for k, v in subprocess_env(tmp_path / "home").items()
           if k != "NOTEWELL_HOME"}
    out = subprocess.run(notewell_command("serve"), capture_output=True, timeout=30,
                         env={**env, "HOME": str(tmp_path / "user"), "XDG_RUNTIME_DIR":
                              str(shared), "PYTHONPATH": str(REPO / "daemon")})
    assert out.returncode == 1 and b"writable by every user" in out.stderr, out.stderr
    assert b"Traceback" not in out.stderr
    shared.chmod(0o1777)  # with the sticky bit (as /tmp has) others cannot rename our entries
    transport.check_parent(str(shared / "run"))
    if os.getuid() == 0:
        foreign = tmp_path / "foreign"
        foreign.mkdir()
        os.chown(foreign, 65534, 65534)
        with pytest.raises(PermissionError, match="owned by uid 65534"):
            transport.check_parent(str(foreign / "run"))
