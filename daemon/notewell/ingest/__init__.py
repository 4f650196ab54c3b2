"""Bringing notes in: chunking, syncing sources into the index, noticing changes.

Owns ``chunking`` (note -> passages), ``sync`` (sources -> index, doing no work twice),
``watch`` (which sources changed, from file events, change tokens and polls) and
``progress`` (progress lines for long work). May import ``notes``, ``config``,
``memory``, ``sources``, ``index`` and the ``model.embedding.Embedder`` interface; never
``search``, ``serve``, ``launcher`` or ``ops``.
"""
