"""Turning text into vectors: the embedder interface, the shipped model and its files.

Owns ``files`` (the pinned model files and finding them), ``embedding`` (the
``Embedder`` interface and the ONNX embedder with its settings), ``custom`` (a model
folder of the user's own: ``[model]`` in config.toml), ``rewrite`` (the int8 rewrite of
the shipped graph), ``runtime`` (which file runs, decided once by its vectors and
recorded; ``default_embedder``, ``custom_embedder``), ``download`` (one file over HTTPS,
resumable, its size and sha256 checked: only ``notewell model use`` calls it), ``catalog``
(the models ``notewell model use`` offers, their downloaded folders and the functional
check) and ``fake`` (a deterministic embedder for tests and benchmarks, with their one
entry point). Imported in that order, each only from the ones before it: no cycles. May
import ``memory``, ``config`` (``ModelConfig``, for ``catalog``) and ``wire.paths``;
nothing else of notewell (``fake`` runs ``cli`` as its entry point, and nothing imports
``fake`` but tests and benchmarks).
"""
