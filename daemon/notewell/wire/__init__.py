"""The keystroke path: where files live, the wire protocol, and the client that speaks it.

Owns ``paths`` (every file and folder notewell uses, from one function each),
``protocol`` (frames and messages between the daemon and its clients), ``client``
(the per-keystroke client, which refuses a socket another user could answer on),
``alfred_json`` and ``messages`` (Alfred's JSON, written once, and the client's own
items) and ``requests`` (each read op's arguments, defaults and
limits, and their one check, shared by the daemon, the CLI and the MCP tools). The client
runs on every keystroke, so it imports nothing from the rest of notewell and nothing
heavy (no ``os``, ``json``, ``msgpack`` or ``typing`` on the normal path;
``tests/test_perf_client.py`` checks); ``requests`` is never on that path, and imports
``jsonschema`` only when it checks. Everything else may import it.

This file stays empty of imports: importing ``notewell.wire.client`` runs it.
"""
