"""Other ONNX files of the same model, built from the installed packages, for comparison.

The shipped ``model.onnx`` stores each weight matrix as int8 with one float scale per output
column, and turns it back into float32 inside the graph (``Cast`` then ``Mul``); onnxruntime
folds those constants at load, so it computes in float32 and int8 only saves disk. Variants:

- ``shipped``: the file as installed.
- ``rewrite``: what notewell runs (``notewell.model.rewrite``): the same int8 weights kept int8
  in memory, matrix products in int8 (``MatMulNBits``), embedding rows scaled after the
  gather.
- ``folded``: the same int8 weights dequantised once into float initialisers (no ``Cast``/
  ``Mul`` left). Same arithmetic as ``shipped``; a check that load-time folding costs nothing.
- ``float``: the original float weights from ``model.safetensors`` put in place of the int8
  ones (each matrix is matched to its float original, and the match is checked).
- ``dynamic-int8``: ``float`` quantised by onnxruntime's ``quantize_dynamic`` with one scale
  per channel: int8 weights *and* activations quantised on the fly, so matrix products run in
  integer arithmetic (VNNI/AMX on recent x86, SDOT on Apple silicon).
- ``dynamic-int8-ffn2-float``: the same, but the six feed-forward output products stay in
  float: their input (after GELU) is the activation that int8 represents worst.

Uses the ``onnx`` package (a notewell dependency, for the rewrite); of these files only
``rewrite`` is what notewell runs (built by ``notewell.model.rewrite`` into its own folder).
Files are written once into a cache folder and reused; their sha256 is printed so a run can
be repeated and compared.
"""

from __future__ import annotations

import os

import common
import numpy as np

VARIANTS = ("shipped", "rewrite", "folded", "float", "dynamic-int8",
            "dynamic-int8-ffn2-float")


def shipped_path() -> str:
    from notewell.model.files import locate_model_files

    return locate_model_files().model


def variant_path(name: str, directory: str | None = None) -> str:
    """The ONNX file of variant ``name``, built on first use."""
    if name not in VARIANTS:
        raise ValueError(f"unknown model variant {name!r}; choose from {', '.join(VARIANTS)}")
    if name == "shipped":
        return shipped_path()
    directory = directory or os.path.join(common.cache_dir(), "models")
    os.makedirs(directory, exist_ok=True)
    stem = name
    # What notewell runs: built again whenever notewell.model.rewrite changes it.
    if name == "rewrite":
        from notewell.model.rewrite import REVISION

        stem = f"rewrite-r{REVISION}"
    path = os.path.join(directory, f"minilm-{stem}.onnx")
    if not os.path.exists(path):
        builders = {"rewrite": _build_rewrite, "folded": _build_folded, "float": _build_float,
                    "dynamic-int8": _build_dynamic_int8,
                    "dynamic-int8-ffn2-float": _build_dynamic_int8_ffn2_float}
        tmp = path + ".tmp"
        builders[name](tmp, directory)
        os.replace(tmp, path)
    return path


def _dequantised(model) -> dict[str, np.ndarray]:
    """Output name -> float array for every ``Cast(q) -> Mul(scale)`` pair on initialisers."""
    from onnx import numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    casts = {n.output[0]: n for n in model.graph.node
             if n.op_type == "Cast" and n.input[0] in inits}
    out = {}
    for node in model.graph.node:
        if node.op_type == "Mul" and node.input[0] in casts and node.input[1] in inits:
            q = numpy_helper.to_array(inits[casts[node.input[0]].input[0]])
            scale = numpy_helper.to_array(inits[node.input[1]])
            out[node.output[0]] = q.astype(np.float32) * scale
    return out


def _replace_dequantisation(model, values: dict[str, np.ndarray]) -> None:
    """Drop the Cast/Mul nodes that produce ``values`` and store the values as initialisers."""
    from onnx import numpy_helper

    inits = {i.name: i for i in model.graph.initializer}
    casts = {n.output[0]: n for n in model.graph.node
             if n.op_type == "Cast" and n.input[0] in inits}
    drop_nodes, drop_inits = [], set()
    for node in model.graph.node:
        if node.op_type == "Mul" and node.output[0] in values:
            cast = casts[node.input[0]]
            drop_nodes += [node, cast]
            drop_inits |= {cast.input[0], node.input[1]}
    for node in drop_nodes:
        model.graph.node.remove(node)
    for name in drop_inits:
        model.graph.initializer.remove(inits[name])
    for name, value in values.items():
        model.graph.initializer.append(numpy_helper.from_array(value.astype(np.float32), name))


def _load_shipped():
    import onnx

    return onnx.load(shipped_path())


def _build_rewrite(path: str, directory: str) -> None:
    from notewell.model.rewrite import rewrite

    rewrite(shipped_path(), path)


def _build_folded(path: str, directory: str) -> None:
    import onnx

    model = _load_shipped()
    _replace_dequantisation(model, _dequantised(model))
    onnx.save(model, path)


def match_float_weights(dequantised: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """For each dequantised tensor, the original float tensor it was quantised from.

    Names differ between the files (the exporter numbered the linear weights), so each is
    matched by value among the originals of the same shape (linear weights transposed, as
    ONNX stores them), and the match must be within one quantisation step everywhere."""
    from reference_model import load_safetensors, weights_path

    originals = {k.removeprefix("bert."): np.asarray(v, dtype=np.float32)
                 for k, v in load_safetensors(weights_path()).items() if v.dtype == np.float32}
    candidates = dict(originals)
    for k, v in originals.items():
        if v.ndim == 2 and k.startswith("encoder."):
            candidates[k + ".T"] = np.ascontiguousarray(v.T)
    out = {}
    used: set[str] = set()
    for name, deq in dequantised.items():
        best, best_err = None, np.inf
        for key, orig in candidates.items():
            if key in used or orig.shape != deq.shape:
                continue
            err = float(np.abs(orig - deq).max())
            if err < best_err:
                best, best_err = key, err
        if best is None:
            raise RuntimeError(f"no float weight of shape {deq.shape} for {name}")
        step = float(np.abs(deq).max()) / 127 + 1e-6
        if best_err > step:
            raise RuntimeError(f"{name}: closest float weight {best} differs by {best_err:.4g},"
                               f" more than one int8 step ({step:.4g}): not the same model")
        used.add(best)
        out[name] = candidates[best]
    return out


def _build_float(path: str, directory: str) -> None:
    import onnx

    model = _load_shipped()
    _replace_dequantisation(model, match_float_weights(_dequantised(model)))
    onnx.save(model, path)


def _build_dynamic_int8(path: str, directory: str, exclude: list[str] | None = None) -> None:
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    source = variant_path("float", directory)
    # The quantiser suggests a pre-processing pass meant for static quantisation.
    logging.getLogger().setLevel(logging.ERROR)
    quantize_dynamic(source, path, per_channel=True, weight_type=QuantType.QInt8,
                     op_types_to_quantize=["MatMul"], nodes_to_exclude=exclude or [])


def _build_dynamic_int8_ffn2_float(path: str, directory: str) -> None:
    import onnx

    model = onnx.load(variant_path("float", directory))
    # The feed-forward output product is the MatMul that reads the GELU's output.
    gelu_outputs = {n.output[0] for n in model.graph.node if n.op_type == "Mul"
                    and n.output[0].startswith("gelu")}
    ffn2 = [n.name for n in model.graph.node
            if n.op_type == "MatMul" and n.input[0] in gelu_outputs]
    if len(ffn2) != 6:
        raise RuntimeError(f"expected 6 feed-forward output products, found {len(ffn2)}")
    _build_dynamic_int8(path, directory, exclude=ffn2)
