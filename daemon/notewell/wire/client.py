"""The per-keystroke client: ask the daemon, print what the launcher wants, exit 0.

Runs once per keystroke, so it imports only what the interpreter has already loaded plus
``_socket`` (``socket`` pulls in ``enum`` and ``selectors``: several milliseconds) and
notewell's import-free ``paths`` and ``protocol``; not even ``os`` (1.2 ms) or
``__future__``. The daemon sends Alfred JSON ready to print, and remembers the query for
the stale-Enter guard. It sends nothing to a socket another user could answer on
(``connect``: the folders, then the kernel's word on who listens). Any failure becomes one
Alfred item (``messages.message_feedback``, imported only then) that says what happened
and what to do; never a traceback, never a blank list.
"""

import sys

from notewell import __version__
from notewell.wire import paths, protocol

TIMEOUT = 2.0
RESTART_WAIT = 5.0  # how long a keystroke waits for a daemon restarting after an upgrade
START_HINT = "Run `notewell serve` in a terminal, or `notewell agent install` to start it at login"


def ask(request: dict, timeout: float = TIMEOUT, socket_path: str | None = None,
        on_progress=None) -> dict:
    """One request, one reply (to the daemon at ``socket_path``, by default this home's).
    Raises ``OSError`` if the daemon is not there. With ``on_progress`` (long work the
    daemon does while we wait: ``index``), each progress frame's event goes to it and the
    reply may take as long as the work: only connecting and sending have ``timeout``."""
    sock = connect(socket_path or paths.socket_path(), timeout)
    try:
        sock.sendall(protocol.frame(protocol.packb(request)))
        if on_progress is not None:
            sock.settimeout(None)  # the daemon closing the connection ends the wait
        while True:
            reply = protocol.unpackb(protocol.read_frame(sock, protocol.MAX_REPLY_BYTES))
            if not isinstance(reply, dict):
                raise protocol.ProtocolError("reply is not a map")
            if on_progress is None or "ok" in reply or "progress" not in reply:
                return reply
            on_progress(reply["progress"])
    finally:
        sock.close()


def connect(path: str, timeout: float):
    """A socket connected to the daemon at ``path``, once it is known to be this user's:
    its folders are this user's alone (``paths.check_socket``) and, where the kernel says,
    the process answering runs as this user. ``paths.NotYours`` otherwise, before a byte
    is sent: another user could have made that folder first and listen in it."""
    import _socket

    paths.check_socket(path)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        _connect(sock, path, timeout)
        uid = peer_uid(sock)
        if uid is not None and uid != _my_uid():
            raise paths.NotYours(f"the daemon on {path} runs as "
                                 + (f"uid {uid}" if uid >= 0 else "a user the kernel "
                                    "would not name") + ", not as you")
    except BaseException:
        sock.close()
        raise
    return sock


def _my_uid() -> int:
    import posix

    return posix.getuid()


def peer_uid(sock) -> int | None:
    """The uid of the process at the other end of a connected Unix socket, from the kernel
    (Linux SO_PEERCRED, macOS and FreeBSD LOCAL_PEERCRED); -1 if the kernel would not say,
    None where we know no way to ask. The uid sits 4 bytes in, in both structures
    (``struct ucred {pid, uid, gid}``, ``struct xucred {version, uid, ...}``)."""
    import _socket

    try:
        if hasattr(_socket, "SO_PEERCRED"):
            creds = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
        elif sys.platform == "darwin" or sys.platform.startswith("freebsd"):
            creds = sock.getsockopt(0, 0x001, 76)  # SOL_LOCAL, LOCAL_PEERCRED, xucred
        else:
            return None
    except OSError:
        return -1
    return int.from_bytes(creds[4:8], sys.byteorder)


def _connect(sock, path: str, timeout: float) -> None:
    """Connect, waiting for room when the daemon's listen queue is full: a Unix socket
    with a timeout then fails at once with EAGAIN instead of waiting (seen with 200
    clients connecting together)."""
    try:
        sock.connect(path)
        return
    except BlockingIOError:
        pass
    import time

    deadline = time.monotonic() + timeout
    while True:
        time.sleep(0.005)
        try:
            sock.connect(path)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise TimeoutError("the daemon's connection queue stayed full") from None


def search_request(query: str) -> dict:
    """A keystroke's request; ``notewell`` says which version asks (the zsh client sends
    the same bytes), so a daemon older than its installation on disk notices."""
    return protocol.request("search", notewell=__version__, query=query, format="alfred")


def alfred_output(query: str) -> str:
    query = query[:protocol.MAX_QUERY_CHARS]
    try:
        reply = ask(search_request(query))
    except (OSError, protocol.ProtocolError) as e:
        if not isinstance(e, paths.NotYours) and _restarting():
            # no socket, or one closing under us: a restart after an upgrade
            return _after_restart(query, "the daemon is restarting after an upgrade")
        return _unreachable(e, query)
    return _render(reply, query)


def _unreachable(e: Exception, query: str) -> str:
    if isinstance(e, paths.NotYours):
        return _message("notewell: " + str(e),
                        "Nothing was sent to it; another user may be posing as notewell. "
                        "`notewell agent restart` moves the daemon to a folder of your own")
    if isinstance(e, (FileNotFoundError, ConnectionRefusedError)):
        return _message(
            "notewell is not running", "Press Enter to start it · " + START_HINT,
            arg="start-daemon", action="start", query=query)
    if isinstance(e, TimeoutError):
        return _message(
            "notewell did not answer in time", "It may be busy indexing; try again",
            rerun=1.0)
    if isinstance(e, protocol.FrameTooLarge):
        return _message(*too_large(e))
    return _message("notewell could not be reached", f"{e} · {START_HINT}")


def too_large(e: "protocol.FrameTooLarge") -> tuple[str, str]:
    """The message for a reply over the frame limit: the daemon is there and answered."""
    return ("notewell's answer was too large to show",
            f"{e.size // 1_000_000} MB, over the {e.limit // (1 << 20)} MiB limit: a note may "
            "be huge · try other words, and update notewell (it cuts such notes)")


def _render(reply: dict, query: str) -> str:
    if reply.get("ok"):
        result = reply.get("result") or {}
        out = result.get("alfred") if isinstance(result, dict) else None
        if isinstance(out, str):
            return out
        return _message("notewell sent an unexpected reply",
                                       "Restart the daemon: notewell agent restart")
    error = reply.get("error") or {}
    code, message = str(error.get("code", "")), str(error.get("message", ""))
    if code == "warming_up":
        return _message("notewell is starting…", "Loading the model and index",
                                       rerun=0.3)
    if code == "restarting":
        return _after_restart(query, message)
    if code == "other_installation":
        return _message("notewell: the daemon is another installation of notewell", message)
    if code == "version_mismatch":
        return _message("notewell was updated: restart the daemon", message,
                                       arg="restart-daemon", action="restart", query=query)
    return _message("notewell: " + (message or code or "unknown error"),
                                   "Run `notewell doctor` for a diagnosis")


def _restarting() -> bool:
    """A daemon is between its old socket and its new one after an upgrade (its marker is
    recent: one left by a restart that failed is ignored after a minute)."""
    import posix
    import time

    try:
        return time.time() - posix.stat(paths.restart_marker()).st_mtime < 60
    except OSError:
        return False


def _after_restart(query: str, message: str) -> str:
    """The daemon was older than its installation and is restarting itself into the new
    version: wait for it (Alfred ends this run anyway on the next keystroke), then answer
    as the new daemon does, "starting…" at first."""
    import time

    deadline = time.monotonic() + RESTART_WAIT
    while time.monotonic() < deadline:
        time.sleep(0.05)
        try:
            reply = ask(search_request(query), timeout=0.5)
        except (OSError, protocol.ProtocolError):
            continue  # between the old daemon's exit and the new one's socket
        if (reply.get("error") or {}).get("code") != "restarting":
            return _render(reply, query)
    return _message("notewell was updated: restarting the daemon…", message, rerun=0.5)


def _message(title: str, subtitle: str = "", **kw) -> str:
    from notewell.wire import messages  # only here: the normal path prints the daemon's JSON

    return messages.message_feedback(title, subtitle, **kw)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    fmt = "alfred"
    words = []
    i = 0
    while i < len(args):
        if args[i] == "--format" and i + 1 < len(args):
            fmt = args[i + 1]
            i += 2
            continue
        words.append(args[i])
        i += 1
    # Bytes that are not UTF-8 arrive as surrogates; they must not break the request.
    query = _surrogate_safe(" ".join(words))
    if fmt != "alfred":
        out = _message(f"unknown format {fmt!r}", "use --format alfred")
        sys.stdout.buffer.write(out.encode("utf-8"))
        return 0
    try:
        out = alfred_output(query)
    except Exception as e:  # the launcher must always get valid JSON
        out = _message("notewell client error", f"{type(e).__name__}: {e}")
    sys.stdout.buffer.write(out.encode("utf-8"))
    sys.stdout.flush()
    return 0


def _surrogate_safe(s: str) -> str:
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


if __name__ == "__main__":
    sys.exit(main())
