"""The resident daemon: socket transport, one handler per op, the background sync loop.

Owns ``daemon`` and ``response_cache``. May import ``engine`` and everything below it,
``launcher.alfred`` (it renders Alfred's JSON) and ``wire``; never ``ops`` or ``cli``.
"""
