"""The per-keystroke client loads almost nothing beyond the bare interpreter: each module it
pulls in is paid for on every keystroke (``typing`` alone cost 28 ms, bench/keystroke.py)."""

from __future__ import annotations

import subprocess
import sys

from conftest import CLIENT

# Modules that cost milliseconds to import; none is needed to print a reply.
COSTLY = ("typing", "re", "enum", "functools", "collections", "contextlib", "dataclasses",
          "json", "socket", "struct", "hashlib", "inspect", "warnings", "tomllib", "ctypes")


def loaded_modules(home, *args: str) -> set[str]:
    # exec, not runpy: runpy itself imports typing and re when it runs a path.
    probe = (
        "import sys\n"
        "before = set(sys.modules)\n"
        f"sys.argv = [{str(CLIENT)!r}, *{list(args)!r}]\n"
        f"code = compile(open({str(CLIENT)!r}).read(), {str(CLIENT)!r}, 'exec')\n"
        "try:\n"
        f"    exec(code, {{'__name__': '__main__', '__file__': {str(CLIENT)!r}}})\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run([sys.executable, "-IS", "-c", probe], capture_output=True,
                         env={"NOTEWELL_HOME": str(home), "PATH": "/usr/bin:/bin"},
                         timeout=10, check=True)
    return set(out.stderr.decode().split())


def test_client_imports_no_costly_module_when_the_daemon_is_down(home):
    added = loaded_modules(home, "postgres vacuum")
    assert "notewell.client" in added
    assert not added & set(COSTLY), added & set(COSTLY)


def test_client_imports_no_costly_module_when_it_gets_results(daemon):
    added = loaded_modules(daemon.home, "banana")
    assert "notewell.client" in added
    assert not added & set(COSTLY), added & set(COSTLY)
