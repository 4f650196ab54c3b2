"""notewell for AI agents: ``notewell mcp``, a stdio relay to MCP sessions the warm
daemon hosts.

Owns ``relay`` (``notewell mcp``: connects to the daemon's socket, starting the daemon
when it is down, switches the connection to MCP and copies newline-delimited JSON-RPC
both ways; imports only ``wire``, and ``ops.login_agent`` to start the daemon:
``tests/test_mcp.py`` checks the modules it loads), ``tools`` (the tools' names, input
schemas generated from ``wire.requests``, output schemas, argument checks and the compact
text an agent reads; pure, no SDK), ``link`` (a tool call as a request to the daemon's
handlers, in the daemon's process, with a bounded wait while it warms up), ``server`` (the
MCP server on the official SDK's low-level ``Server``) and ``session`` (one SDK session per
relay connection, run by the daemon on the connection's thread, with its limits). The
daemon (``serve.daemon``) imports ``session`` only when first used. May import ``wire``
and, of ``ops``, ``agent``.
"""
