"""``notewell doctor``: check each link of the chain, one line each, with the next step.

this installation (its version, where it lives, the files a launcher runs) -> SQLite
extension loading -> model files -> config -> each source readable -> index built with
this model and chunker -> daemon answering, and of this version -> socket and directory
private -> agent loaded and running this installation -> Alfred workflow built for this
installation -> its zsh client answering by itself -> an agent's MCP session through
``notewell mcp`` -> which agent clients run this installation's MCP server. Checks only
read: nothing is migrated or started (with the daemon up, the alfred client check runs one
empty Alfred search through the zsh client, as Alfred would, and the MCP check one
search through the relay and a session of the daemon, as an agent would), and the one
thing created is the model-file choice, if no daemon has made it yet (about a second, in
``<home>/models``; the daemon would make the same one at its start). ``run`` returns the
results; the CLI prints them and exits non-zero when any failed. The model's checks, and
``Check`` itself, live in ``ops.checks``.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from notewell.ops.checks import (
    FAIL,
    OK,
    REINSTALL,
    SKIP,
    WARN,
    Check,
    check_model,
    check_model_rewrite,
    check_own_model,
)
from notewell.wire import paths

if TYPE_CHECKING:
    from notewell.model.embedding import Embedder


def check_installation() -> Check:
    """The package itself: the launcher scripts and the demo corpus it ships, and the zsh
    client carrying this version (it tells a stale daemon to restart)."""
    from notewell import __version__, installed_version
    from notewell.launcher import alfred_workflow
    from notewell.ops import demo

    name = "installation"
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    scripts = (alfred_workflow.ZSH_CLIENT, alfred_workflow.ZSH_RUN, alfred_workflow.PYTHON_CLIENT)
    missing = [n for n in scripts if not os.path.isfile(alfred_workflow.script_path(n))]
    if not os.path.isdir(demo.demo_notes_dir()):
        missing.append("ops/demo_corpus")
    if missing:
        return Check(name, FAIL, f"notewell {__version__} at {here} lacks "
                     f"{', '.join(missing)}", REINSTALL)
    on_disk = installed_version()
    if on_disk != __version__:
        return Check(name, FAIL, f"this process runs notewell {__version__}, the files at "
                     f"{here} are {on_disk}", "run `notewell doctor` again")
    with open(alfred_workflow.script_path(alfred_workflow.ZSH_CLIENT), encoding="utf-8") as f:
        zsh_version = next((line.split("=", 1)[1].strip() for line in f
                            if line.startswith("typeset -g _notewell_version=")), None)
    if zsh_version != __version__:
        return Check(name, FAIL, f"the zsh client says version {zsh_version}, the package "
                     f"{__version__}", REINSTALL)
    return Check(name, OK, f"notewell {__version__} at {here} (Python "
                 f"{sys.version.split()[0]}, {sys.executable}); launcher scripts present")


def check_sqlite() -> Check:
    name = "sqlite extension"
    try:
        from notewell.index.schema import probe

        sqlite, vec = probe()
    except Exception as e:
        return Check(name, FAIL, f"apsw/sqlite-vec/FTS5 do not load: {type(e).__name__}: {e}",
                     REINSTALL)
    return Check(name, OK, f"SQLite {sqlite} with FTS5, sqlite-vec {vec}")


def check_config():
    """The config check, and the config for the checks after it (None if unusable)."""
    from notewell import config

    try:
        cfg = config.load()
    except config.ConfigError as e:
        return Check("config", FAIL, str(e), "fix the file, or move it aside and run "
                     "`notewell setup`"), None
    if not cfg.sources:
        return Check("config", FAIL, f"no sources in {cfg.path}",
                     "run `notewell setup` (or add a [[sources]] table: README, "
                     "\"Configuration\")"), cfg
    names = ", ".join(f"{s.name} ({s.type})" for s in cfg.sources)
    if cfg.warnings:  # allowed, but probably not meant (an exclude of every note)
        return Check("config", WARN, f"{cfg.path}: {names}; {'; '.join(cfg.warnings)}",
                     "fix the exclude patterns in config.toml"), cfg
    return Check("config", OK, f"{cfg.path}: {names}"), cfg


def check_source(src_cfg, platform: str) -> Check:
    """Whether this process can read the source: "not allowed" (macOS privacy controls,
    permissions: the fix names the program to allow) told from "not there" (the fix is in
    config.toml) by the errno of the refused call (``ops.privacy``)."""
    from notewell.ops import privacy
    from notewell.sources import Listing, open_source
    from notewell.sources.base import FolderUnreadable, SourceDenied

    name = f"source {src_cfg.name}"
    fix_config = f"fix source {src_cfg.name!r} in config.toml"
    if src_cfg.type != "bear" and src_cfg.path:  # Bear's source tells for itself
        found = privacy.diagnose(os.path.expanduser(src_cfg.path))
        if found is not None:
            what, error = found
            detail = f"{what}: {src_cfg.path} ({error.strerror or error})"
            return Check(name, FAIL, detail, privacy.grant_hint(platform, src_cfg.path)
                         if what == "not allowed" else fix_config)
    try:
        source = open_source(src_cfg)
        found = source.scan()
        first = next(iter(found), None)
        if isinstance(found, Listing) and found.error is not None:
            raise found.error  # some folders cannot be listed: the rest is readable
    except FolderUnreadable as e:
        return Check(name, FAIL, str(e), privacy.grant_hint(platform, src_cfg.path or "")
                     if e.denied else "reconnect the disk or share it is on")
    except (SourceDenied, PermissionError) as e:
        path = privacy.denied_path(e) or src_cfg.path or ""
        return Check(name, FAIL, f"not allowed: {e}", privacy.grant_hint(platform, path))
    except ImportError as e:
        return Check(name, FAIL, f"{src_cfg.type} sources are not available: {e}",
                     "update notewell")
    except Exception as e:
        return Check(name, FAIL, str(e) or type(e).__name__, fix_config)
    where = src_cfg.path or "default location"
    readable = (f"{src_cfg.type} at {where}: readable"
                + ("" if first is not None else " (no notes yet)"))
    links = getattr(found, "links_out", ())
    if links:  # never read: a cloned vault's `x.md -> ~/.ssh/id_ed25519` stays private
        target = os.path.realpath(os.path.join(src_cfg.path or "", links[0]))
        return Check(name, WARN, f"{readable}; {len(links)} link{'s' if len(links) != 1 else ''}"
                     f" out of the folder skipped, e.g. {links[0]} -> {target}",
                     "notes are read only inside their source's folder: move the file in "
                     "to index it, or leave it out")
    return Check(name, OK, readable)


def check_daemon_sources(platform: str, status: dict) -> list[Check]:
    """The sources the running daemon was refused (``status``: its ``status`` reply):
    under launchd it has none of the grants of the terminal ``doctor`` runs in, so
    reading them here proves nothing."""
    from notewell.ops import privacy
    from notewell.sources.base import DENIED

    denied = [src for src in status.get("sources") or ()
              if (src.get("last_error") or "").startswith(DENIED)]
    return [Check(f"daemon reads {src.get('name')}", FAIL, src["last_error"],
                  privacy.grant_hint(platform, src.get("path") or "", daemon_only=True))
            for src in denied] + check_copies(status)


def check_copies(status: dict) -> list[Check]:
    """A WARN for each in-memory copy the running daemon failed to load (its ``status``
    reply's ``copies``): it answers from SQLite meanwhile, tens of times slower per
    keystroke, and retries by itself."""
    return [Check(f"daemon's {name} copy", WARN,
                  f"{state}; searches read SQLite meanwhile (slower)",
                  f"see the log in {paths.log_dir()}; `notewell agent restart` if it "
                  "keeps failing")
            for name, state in (status.get("copies") or {}).items()
            if str(state).startswith("failed")]


def check_index(embedder: Callable[[], Embedder] | None = None, cfg=None) -> Check:
    """Whether the index fits the model: ``embedder``'s, else the one ``cfg`` names (the
    config ``check_config`` read; None: the shipped model)."""
    name = "index"
    from notewell.index import store
    from notewell.index.schema import SCHEMA_VERSION, describe, file_problems

    path = store.current_path()
    if not os.path.exists(path):
        return Check(name, FAIL, f"no index at {path}", "run `notewell index`")
    try:
        from notewell.config import Config
        from notewell.engine import chunker_for, embedder_for

        model = embedder() if embedder else embedder_for(cfg or Config())
        want = {"embedder": model.fingerprint(), "dim": str(model.dim),
                "chunker": chunker_for(model).fingerprint()}
    except Exception as e:
        return Check(name, SKIP, f"cannot tell without the model: {e}")
    try:
        version, meta, notes = describe(path)
    except Exception as e:
        return Check(name, FAIL, f"{path} cannot be read: {e}",
                     "run `notewell index --rebuild` (the old file is kept aside)")
    if version > SCHEMA_VERSION:
        return Check(name, FAIL, f"schema {version}, newer than this notewell's "
                     f"({SCHEMA_VERSION})", "upgrade notewell, or `notewell index --rebuild`")
    for key, value in want.items():
        if meta.get(key) != value and key == "chunker":  # the next sync re-chunks it
            return Check(name, WARN, f"{notes} notes, cut by chunker {meta.get(key)!r}; "
                         f"notewell now uses {value!r}: it answers meanwhile, and the next "
                         "sync re-chunks it, embedding only the passages that changed",
                         "`notewell agent restart`, or `notewell index` with no daemon")
        if meta.get(key) != value:
            return Check(name, FAIL, f"built with {key} {meta.get(key)!r}, notewell now uses "
                         f"{value!r}", "run `notewell index --rebuild`")
    problems = file_problems(path)  # SQLite's quick_check: every page read from the file
    if problems:
        return Check(name, FAIL, f"{path} is damaged: {problems[0][:300]}",
                     "`notewell agent restart` moves it aside and rebuilds it from your "
                     "notes (or `notewell index --rebuild` with no daemon)")
    if version < SCHEMA_VERSION:  # migrated in place the next time it is opened
        return Check(name, WARN, f"{notes} notes, schema {version}: upgraded to "
                     f"{SCHEMA_VERSION} when the daemon next opens it ({path})",
                     "`notewell agent restart` (once: about 15 s per 100,000 chunks)")
    return Check(name, OK, f"{notes} notes, built with this model and chunker ({path})")


def check_daemon() -> Check:
    from notewell import __version__
    from notewell.wire import client, protocol

    name = "daemon"
    try:
        reply = client.ask(protocol.request("ping"), timeout=2.0)
    except (FileNotFoundError, ConnectionRefusedError):
        return Check(name, FAIL, f"not running (no answer on {paths.socket_path()})",
                     "`notewell agent start` (or `notewell serve` in a terminal)")
    except (OSError, protocol.ProtocolError) as e:
        return Check(name, FAIL, f"no usable answer: {e}", "`notewell agent restart`")
    if not reply.get("ok"):
        message = (reply.get("error") or {}).get("message", "error")
        return Check(name, FAIL, message, "`notewell agent restart`")
    info = reply["result"]
    if info.get("version") != __version__:
        return Check(name, FAIL, f"runs notewell {info.get('version')}, installed is "
                     f"{__version__}", "`notewell agent restart`")
    state = info.get("state")
    if state == "error":
        problem = (daemon_status() or {}).get("problem")
        return Check(name, FAIL, "running but its engine failed to start"
                     + (f": {problem}" if problem else ""),
                     "see `notewell status` and the log in " + paths.log_dir())
    return Check(name, OK, f"pid {info.get('pid')}, {state}, protocol "
                 f"{info.get('protocol')}")


LOW_SPACE = 16 * 1024 * 1024  # below this, an index write may fail any moment


def daemon_status() -> dict | None:
    """The running daemon's ``status`` reply, None when it does not answer."""
    from notewell.wire import client, protocol

    try:
        return client.ask(protocol.request("status"), timeout=2.0).get("result")
    except (OSError, protocol.ProtocolError):
        return None


def check_disk(status: dict | None = None) -> Check:
    """Room on the disk holding the index: FAIL when the daemon found it full (``status``:
    its ``disk_full``, or the engine's start failed so) or almost no space is left, a
    warning when a rebuild beside the index would not fit."""
    from notewell.index import failures, store

    name = "disk space"
    folder = paths.index_dir()
    free = failures.free_bytes(folder)
    status = status or {}
    said = bool(status.get("disk_full")) or "is full: free" in (status.get("problem") or "")
    if said or (free is not None and free < LOW_SPACE):
        return Check(name, FAIL, failures.disk_full_words(folder) + (
            " (the daemon could not write)" if said else ""),
            failures.MAKE_ROOM + "; the daemon carries on once there is room")
    if free is None:
        return Check(name, SKIP, f"cannot tell the free space on the disk holding {folder}")
    size = sum(os.path.getsize(p) for _, p in store.generations(folder))
    if free < size + LOW_SPACE:
        return Check(name, WARN, f"{free / failures.MB:.0f} MB free on the disk holding "
                     f"{folder}: too little for a rebuild beside the index "
                     f"({size / failures.MB:.0f} MB)", failures.MAKE_ROOM)
    return Check(name, OK, f"{free / failures.MB:.0f} MB free on the disk holding {folder}")


def check_socket() -> Check:
    name = "socket permissions"
    directory, sock = paths.runtime_dir(), paths.socket_path()
    try:
        dst = os.stat(directory)
    except FileNotFoundError:
        return Check(name, SKIP, f"{directory} does not exist yet (the daemon creates it)")
    problems = []
    if dst.st_uid != os.getuid():
        problems.append(f"{directory} is owned by uid {dst.st_uid}")
    if stat.S_IMODE(dst.st_mode) != 0o700:
        problems.append(f"{directory} is {stat.S_IMODE(dst.st_mode):o}, not 700")
    with contextlib.suppress(FileNotFoundError):
        sst = os.stat(sock)
        if stat.S_IMODE(sst.st_mode) & 0o077:
            problems.append(f"{sock} is {stat.S_IMODE(sst.st_mode):o}, not 600")
    if problems:
        return Check(name, FAIL, "; ".join(problems),
                     f"stop the daemon, remove {directory}, start it again")
    return Check(name, OK, f"{directory} 700, socket 600")


def check_time_machine(platform: str, xattrs=None) -> Check:
    """Whether the index and model folders carry Time Machine's exclusion, which the
    daemon sets when it starts (``notewell.timemachine``)."""
    from notewell import timemachine

    name = "Time Machine"
    if platform != "darwin":
        return Check(name, SKIP, "macOS only")
    dirs = {what: path for what, path in timemachine.cache_dirs().items()
            if os.path.isdir(path)}
    if not dirs:
        return Check(name, SKIP, "no index or model cache yet (the daemon marks them)")
    try:
        xattrs = xattrs or timemachine.LibSystemXattrs()
        missing = [f"{what} ({path})" for what, path in dirs.items()
                   if not timemachine.is_excluded(path, xattrs)]
    except (OSError, AttributeError) as e:
        return Check(name, WARN, f"cannot tell: {e}")
    if missing:
        return Check(name, WARN, f"backed up every hour though rebuildable: "
                     f"{', '.join(missing)}", "`notewell agent restart` (the daemon marks "
                     "them when it starts), or `tmutil addexclusion PATH`")
    return Check(name, OK, "index and model cache excluded")


def check_agent(platform: str, run: Callable[..., subprocess.CompletedProcess]) -> Check:
    from notewell.ops import login_agent

    name = "agent"
    try:
        st = login_agent.status(platform, run)
    except login_agent.AgentError as e:
        return Check(name, FAIL, str(e), "start the daemon by hand: `notewell serve`")
    runs = login_agent.installed_program(platform)
    want = login_agent.program()
    if st.installed and runs is not None and runs != want:
        return Check(name, FAIL, f"{st.describe()}; it runs `{' '.join(runs)}`, not this "
                     f"installation's `{' '.join(want)}`",
                     "`notewell agent install` (from the notewell you use now)")
    if st.loaded and st.running:
        return Check(name, OK, st.describe())
    if st.loaded:
        return Check(name, FAIL, st.describe(), f"`notewell agent restart`; logs: {st.logs}")
    return Check(name, FAIL, st.describe(), "`notewell agent install`")


def check_workflow(platform: str) -> Check:
    import plistlib
    import zipfile

    from notewell.launcher import alfred_workflow

    name = "alfred workflow"
    path = alfred_workflow.default_output()
    if not os.path.exists(path):
        if platform != "darwin":
            return Check(name, SKIP, "not built (Alfred is macOS-only)")
        return Check(name, FAIL, f"not built ({path})", "`notewell alfred build` then "
                     "`notewell alfred install`")
    try:
        with zipfile.ZipFile(path) as zf:
            plist = plistlib.loads(zf.read("info.plist"))
            copy = zf.read(alfred_workflow.ZSH_CLIENT)
    except (OSError, KeyError, zipfile.BadZipFile, plistlib.InvalidFileException) as e:
        return Check(name, FAIL, f"{path} is damaged: {e}", "`notewell alfred build`")
    want = alfred_workflow.this_installation()
    script = next(((o["config"].get("type"), o["config"].get("script"))
                   for o in plist.get("objects", [])
                   if o.get("type") == "alfred.workflow.input.scriptfilter"), None)
    if script != alfred_workflow.script_filter_command() or \
            plist.get("variables", {}).get("NOTEWELL_HOME") != want.home:
        return Check(name, FAIL, f"{path} was built for another installation or home",
                     "`notewell alfred build` and `notewell alfred install` again")
    # Another version's workflow is fine as long as its copy of the zsh client hands over
    # to the client the daemon records (paths.record_client; the copy reads
    # "<home>/notewell-client"). One built before that did not, and a daemon of another
    # version sends all its keystrokes to Python.
    if b"/" + os.path.basename(paths.client_record()).encode() not in copy:
        return Check(name, FAIL, f"{path} was built by notewell {plist.get('version')}, "
                     "before the workflow followed upgrades: searches go through Python "
                     "until it is rebuilt", "`notewell alfred install` (once: later "
                     "upgrades need nothing)")
    return Check(name, OK, f"{path}, built for this home (by notewell "
                 f"{plist.get('version')}); it runs the daemon's own zsh client")


def check_fast_client(platform: str, daemon_up: bool) -> Check:
    """Whether Alfred's zsh client answers by itself: when it cannot, every keystroke
    silently pays for a Python start in its fallback."""
    import shutil

    from notewell.launcher import alfred_workflow

    name = "alfred client"
    fast = alfred_workflow.this_installation().fast_client
    if fast is None:
        missing = alfred_workflow.script_path(alfred_workflow.ZSH_CLIENT)
        return Check(name, FAIL if platform == "darwin" else SKIP, f"{missing} is missing: "
                     "the workflow runs the Python client", "reinstall notewell")
    # Alfred runs /bin/zsh, whatever comes first on PATH (Homebrew's, say).
    zsh = "/bin/zsh" if os.path.exists("/bin/zsh") else shutil.which("zsh")
    problem = None
    if zsh is None:
        problem = "zsh not found"
    else:
        # Sourced as Alfred does (after ~/.zshenv), the fallback set to /bin/false: an
        # answer can only come from zsh itself.
        probe = [zsh, "-c", 'source "$1" ""', "zsh", fast] if daemon_up else [
            zsh, "-f", "-c", "zmodload zsh/net/socket zsh/system"]
        try:
            out = subprocess.run(probe, capture_output=True, timeout=10, check=False,
                                 env={**os.environ, "NOTEWELL_PYTHON": "/bin/false"})
            if out.returncode != 0 or (daemon_up and not out.stdout.startswith(b"{")):
                problem = (f"{zsh} did not answer by itself (exit {out.returncode})"
                           if daemon_up else f"{zsh} lacks its socket module")
        except (OSError, subprocess.TimeoutExpired) as e:
            problem = f"{zsh} failed: {e}"
    if problem is None:
        return Check(name, OK, f"{fast} answers" + (" the daemon" if daemon_up else
                                                    " (zsh and its socket module found)"))
    detail = f"{problem}: the Python client answers instead, ~6 ms slower per keystroke"
    if platform != "darwin":
        return Check(name, SKIP, detail)
    return Check(name, FAIL, detail, "`notewell doctor` after `notewell agent start`; if "
                 "it persists, report it with `zsh --version`")


MCP_PROBE = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "notewell doctor", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
     "params": {"name": "search_notes", "arguments": {"query": "notes", "limit": 1}}},
]


def check_mcp_session(daemon_up: bool) -> Check:
    """The agents' path end to end: this installation's ``notewell mcp`` (the relay), a
    session in the daemon, one search, as an agent's client would run them."""
    name = "mcp session"
    if not daemon_up:
        return Check(name, SKIP, "the daemon is not running (see the daemon check)")
    command = [sys.executable, "-m", "notewell", "mcp", "--no-start"]
    try:
        replies, stderr = _mcp_exchange(command, MCP_PROBE, want=2, timeout=20.0)
    except (OSError, ValueError) as e:
        return Check(name, FAIL, f"`notewell mcp` failed: {e}", "`notewell doctor` again; "
                     "if it persists, `notewell agent restart`")
    for key in (1, 2):
        reply = replies.get(key) or {}
        if "result" not in reply or (reply["result"] or {}).get("isError"):
            error = reply.get("error") or (reply.get("result") or {}).get("content") or \
                stderr.strip()[-300:] or "no answer within 20 s"
            return Check(name, FAIL, f"{'initialize' if key == 1 else 'search_notes'}: {error}",
                         "`notewell agent restart`, then `notewell doctor`")
    hits = len(replies[2]["result"].get("structuredContent", {}).get("hits", []))
    return Check(name, OK, f"`notewell mcp` reached a daemon session; search_notes "
                 f"answered ({hits} hit{'s' if hits != 1 else ''})")


def _mcp_exchange(command: list[str], messages: list[dict], want: int, timeout: float
                  ) -> tuple[dict, str]:
    """Send ``messages`` to an MCP server on stdio and read its answers until the one
    with id ``want`` (stdin stays open meanwhile, as a client's does); the answers by id,
    and what it wrote to stderr."""
    import json
    import selectors
    import time

    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    replies: dict = {}
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        proc.stdin.flush()
        waiter = selectors.DefaultSelector()
        waiter.register(proc.stdout, selectors.EVENT_READ)
        deadline, buf = time.monotonic() + timeout, b""
        while want not in replies and time.monotonic() < deadline:
            if not waiter.select(deadline - time.monotonic()):
                break
            data = os.read(proc.stdout.fileno(), 1 << 16)
            if not data:
                break
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                message = json.loads(line)
                replies[message.get("id")] = message
        proc.stdin.close()
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return replies, proc.stderr.read().decode(errors="replace") if proc.stderr else ""


def check_mcp_clients(platform: str) -> Check:
    """Which agent clients have notewell's MCP server, and whether their entry runs this
    installation (``ops.mcp_clients``)."""
    from notewell.ops import mcp_clients

    name = "mcp clients"
    found = [(c, cmd, same) for c, cmd, same in mcp_clients.configured(platform) if cmd]
    if not found:
        return Check(name, SKIP, "no agent client has notewell "
                     "(`notewell mcp install --client claude-desktop|claude-code|cursor`)")
    elsewhere = [(c, cmd) for c, cmd, same in found if not same]
    if elsewhere:
        return Check(name, WARN, "; ".join(f"{c} runs `{cmd}`, not this installation"
                                           for c, cmd in elsewhere),
                     f"`notewell mcp install --client {elsewhere[0][0]}`")
    return Check(name, OK, ", ".join(c for c, _, _ in found) + " run this installation's "
                 "`notewell mcp`")


def run(platform: str | None = None,
        run_cmd: Callable[..., subprocess.CompletedProcess] = subprocess.run,
        embedder: Callable[[], Embedder] | None = None) -> list[Check]:
    """Every check in order. ``embedder`` makes the embedder whose fingerprint the index
    must carry (default: the model ``config.toml`` names, else the shipped one)."""
    platform = platform or sys.platform
    config_check, cfg = check_config()
    checks = [check_installation(), check_sqlite(), check_model()]
    if cfg is None or cfg.model is None:  # with [model], "own model" says what runs
        checks.append(check_model_rewrite())
    checks.append(config_check)
    if cfg is not None and cfg.model is not None:
        checks += check_own_model(cfg.model)
    checks += [check_source(src, platform) for src in (cfg.sources if cfg else ())]
    checks += [check_index(embedder, cfg), daemon := check_daemon()]
    up = daemon.status == OK
    status = daemon_status()  # one reply for the checks that read it
    if up and status is not None:
        checks += check_daemon_sources(platform, status)
    return [*checks, check_disk(status), check_socket(), check_time_machine(platform),
            check_agent(platform, run_cmd), check_workflow(platform),
            check_fast_client(platform, up), check_mcp_session(up), check_mcp_clients(platform)]


def failed(checks: list[Check]) -> bool:
    return any(c.status == FAIL for c in checks)
