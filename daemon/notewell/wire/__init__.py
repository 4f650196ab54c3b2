"""The keystroke path: where files live, the wire protocol, and the client that speaks it.

Owns ``paths`` (every file and folder notewell uses, from one function each),
``protocol`` (frames and messages between the daemon and its clients) and ``client``
(the per-keystroke client). Runs on every keystroke, so it imports nothing from the rest
of notewell and nothing heavy (no ``os``, ``json``, ``msgpack`` or ``typing`` on the
normal path; ``tests/test_client.py`` checks). Everything else may import it.

This file stays empty of imports: importing ``notewell.wire.client`` runs it.
"""
