"""notewell for AI agents: ``notewell mcp``, a stdio MCP server over the warm daemon.

Owns ``tools`` (the tools' names, input schemas generated from ``wire.requests``, output
schemas, argument checks and the compact text an agent reads; pure, no SDK), ``link``
(asking the daemon through ``wire.client``, starting it once when it is down, bounded
waits) and ``server`` (the MCP server on the official SDK's low-level ``Server``, over
stdio). A thin process: it never
imports the model, onnxruntime, numpy or the index (``tests/test_mcp.py`` checks the
modules it loads). May import ``wire`` and, of ``ops``, ``agent`` (to start the daemon).
"""
