"""Turning text into vectors: the embedder interface, the shipped model and its files.

Owns ``files`` (the pinned model files and finding them), ``embedding`` (the
``Embedder`` interface and the ONNX embedder with its settings), ``custom`` (a model
folder of the user's own: ``[model]`` in config.toml), ``rewrite`` (the int8 rewrite of
the shipped graph), ``runtime`` (which file runs, decided once by its vectors and
recorded; ``default_embedder``, ``custom_embedder``) and ``fake`` (a deterministic
embedder for tests and benchmarks, with their one entry point). Imported in that order,
each only from the ones before it: no cycles. May import ``memory`` and ``wire.paths``;
nothing else of notewell (``fake`` runs ``cli`` as its entry point, and nothing imports
``fake`` but tests and benchmarks).
"""
