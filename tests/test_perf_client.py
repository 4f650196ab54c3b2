"""The per-keystroke client loads almost nothing beyond the bare interpreter: each module it
pulls in is paid for on every keystroke (``typing`` alone cost 28 ms, bench/keystroke.py)."""

from __future__ import annotations

from helpers import modules_loaded_by_client

# Modules that cost milliseconds to import; none is needed to print a reply.
COSTLY = ("typing", "re", "enum", "functools", "collections", "contextlib", "dataclasses",
          "json", "socket", "struct", "hashlib", "inspect", "warnings", "tomllib", "ctypes")


def test_client_imports_no_costly_module_when_the_daemon_is_down(home):
    added = modules_loaded_by_client(home, "postgres vacuum")
    assert "notewell.wire.client" in added
    assert not added & set(COSTLY), added & set(COSTLY)


def test_client_imports_no_costly_module_when_it_gets_results(daemon):
    added = modules_loaded_by_client(daemon.home, "banana")
    assert "notewell.wire.client" in added
    assert not added & set(COSTLY), added & set(COSTLY)


def test_client_getting_results_loads_only_the_socket_and_notewell_wire_modules(daemon):
    """The path of every keystroke: not even ``os`` (1.2 ms) or ``__future__``, and no
    Alfred rendering (the daemon sends the JSON)."""
    added = modules_loaded_by_client(daemon.home, "banana")
    assert added == {"_socket", "notewell", "notewell.wire", "notewell.wire.client",
                     "notewell.wire.paths", "notewell.wire.protocol"}, added
