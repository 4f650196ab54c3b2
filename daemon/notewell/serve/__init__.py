"""The resident daemon: socket transport, one handler per op, the background sync loop.

Owns ``transport`` (socket, lock, frames, peer check, limits), ``handlers`` (one per op,
with the prepared answers of ``response_cache``), ``background`` (engine start, watcher,
debounce, backoff, lag, index generations, on an injectable clock) and ``daemon`` (the
three wired together, and ``notewell serve``; it hosts agents' MCP sessions through
``agents.session``, imported when first used). May import ``engine`` and everything below
it, ``launcher.alfred`` (it renders Alfred's JSON), ``wire`` and, lazily,
``agents.session``; never ``ops`` or ``cli``.
"""
