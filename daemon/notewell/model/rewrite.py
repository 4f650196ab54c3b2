"""The ONNX file the embedder runs: the shipped model, rewritten once so that its weights
stay int8 in memory.

The shipped ``model.onnx`` stores every weight matrix as int8 codes with one float scale per
output column and turns them back into float inside the graph (``Cast`` then ``Mul``).
onnxruntime folds those constants at load, so the daemon held 90 MB of float32 weights and
every query read the 42 MB of matrix weights once more. The rewrite keeps the same codes and
scales, so the same weights:

- each matrix product becomes onnxruntime's ``MatMulNBits`` with 8-bit weights (the int8
  code plus 128, zero point 128, the column's scale for every block), computing in int8
  with the activations quantized per block of ``BLOCK`` values (``accuracy_level`` 4);
- the word and position embedding tables are gathered as int8 and scaled after the gather;
- each layer's attention, which the export spells out in ~23 small operators (heads split
  and joined by reshapes and transposes, the padding mask, softmax and a guard against
  all-masked rows), becomes one ``MultiHeadAttention``, and each GELU after its bias one
  ``BiasGelu``: 261 operators become 117, a query 2.93 -> 2.50 ms p50 and indexing in
  batches of 8 20.7 -> 30.2 chunks/s (the shipped file: 4.26 ms, 22.9), with the same
  vectors (cosine to the unfused rewrite's min 0.99976 over 100 texts).

Measured on the 2-core Xeon (``bench/indexing.py``, ``bench/quality.py``): 63 MB
less resident, a short query 3.3 -> 2.6 ms before the fusion above, vectors
within cosine 0.9994 of the shipped file's; on an index built with it, nDCG@10 0.7389 on
SciFact and 0.966 on the demo set (shipped: 0.7395, 0.967); with its queries over an
index of the shipped file's vectors (an upgrade: the fingerprint stays), 0.7406 and 0.960
(one of 54 demo queries finds its note second instead of first). Blocks of 128 were
faster (2.3 ms) but gave 0.7362 and 0.952 on a fresh index. The rewrite needs the
``onnx`` package and is built once per shipped file, rewrite revision and onnxruntime
version into ``paths.model_dir()`` (``runtime`` decides whether it runs).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from notewell.wire import paths

REVISION = 2  # bump when ``rewrite`` changes what it writes (2: attention and GELU fused)
BLOCK = 32  # activations quantized per 32 values: see the module docstring for why not 128


def rewrite(source: str, dest: str, block: int = BLOCK) -> None:
    """Write ``source`` (the shipped model) to ``dest`` with int8 weights kept int8."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(source)
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    users: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
    replaced = 0
    for cast in list(graph.node):
        if cast.op_type != "Cast" or cast.input[0] not in inits:
            continue
        (mul,) = users[cast.output[0]]
        (user,) = users[mul.output[0]]
        codes = numpy_helper.to_array(inits[cast.input[0]])
        if codes.dtype != np.int8 or mul.op_type != "Mul" or mul.input[1] not in inits:
            raise ValueError(f"{cast.input[0]}: not an int8 weight scaled by a Mul")
        scale = numpy_helper.to_array(inits[mul.input[1]]).astype(np.float32)
        base = cast.input[0]
        if user.op_type == "MatMul" and user.input[1] == mul.output[0]:
            k, n = codes.shape
            if k % block or scale.size != n:
                raise ValueError(f"{base}: {codes.shape} with {scale.size} scales")
            blocks = k // block
            packed = (codes.T.astype(np.int16) + 128).astype(np.uint8).reshape(n, blocks, block)
            new = [
                numpy_helper.from_array(packed, base + "_nbits"),
                numpy_helper.from_array(np.repeat(scale.reshape(n), blocks), base + "_scales"),
                numpy_helper.from_array(np.full(n * blocks, 128, np.uint8), base + "_zero"),
            ]
            nodes = [helper.make_node(
                "MatMulNBits", [user.input[0]] + [t.name for t in new], list(user.output),
                name=user.name + "_nbits", domain="com.microsoft", K=k, N=n, bits=8,
                block_size=block, accuracy_level=4)]
        elif user.op_type == "Gather" and user.input[0] == mul.output[0]:
            if scale.shape != (codes.shape[0], 1):
                raise ValueError(f"{base}: table {codes.shape} with scales {scale.shape}")
            ids = user.input[1]
            new = []
            nodes = [
                helper.make_node("Gather", [base, ids], [base + "_rows"], axis=0),
                helper.make_node("Gather", [mul.input[1], ids], [base + "_row_scales"], axis=0),
                helper.make_node("Cast", [base + "_rows"], [base + "_float"],
                                 to=TensorProto.FLOAT),
                helper.make_node("Mul", [base + "_float", base + "_row_scales"],
                                 list(user.output)),
            ]
        else:
            raise ValueError(f"{base}: used by {user.op_type}, which the rewrite does not know")
        at = list(graph.node).index(user)
        for offset, node in enumerate(nodes):
            graph.node.insert(at + offset, node)
        for node in (user, mul, cast):
            graph.node.remove(node)
        graph.initializer.extend(new)
        replaced += 1
    if not replaced:
        raise ValueError(f"{source}: no int8 weights found; not the expected model file")
    fuse_attention(graph)
    fuse_gelu(graph)
    _drop_unused(graph)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    paths.write_atomic(dest, model.SerializeToString())


def fuse_attention(graph) -> int:
    """Each layer's attention as one onnxruntime ``MultiHeadAttention`` over the outputs of
    the query, key and value projections; the number of layers fused.

    The export spells attention out in ~23 small operators per layer (heads split by
    reshapes and transposes, Q and Kᵀ scaled, the padding mask added, softmax, a guard
    against rows that are all mask, times V, heads joined again). Matched from the
    output projection's input backwards; a layer that does not match stays as it is."""
    from onnx import TensorProto, helper

    consts, made_by = _constants(graph), _made_by(graph)

    def projection(name: str):
        """The bias ``Add`` after a ``MatMulNBits``, back through reshapes/transposes."""
        node = made_by(name)
        while node is not None and node.op_type in ("Reshape", "Transpose"):
            node = made_by(node.input[0])
        if node is not None and node.op_type == "Add" and made_by(node.input[0], "MatMulNBits"):
            return node
        return None

    mask = "notewell_key_padding_mask"
    fused = 0
    for at, join in enumerate(list(graph.node)):
        # join: Reshape(Transpose(MatMul(Where(IsNaN(p), 0, p) with p = Softmax(Add(
        # MatMul(Mul(Q, s), Mul(Kᵀ, s)), mask)), V)))
        if join.op_type != "Reshape":
            continue
        heads = made_by(join.input[0], "Transpose")
        context = heads and made_by(heads.input[0], "MatMul")
        guard = context and made_by(context.input[0], "Where")
        nan = guard and made_by(guard.input[0], "IsNaN")
        probs = nan and made_by(nan.input[0], "Softmax")
        masked = probs and made_by(probs.input[0], "Add")
        scores = masked and made_by(masked.input[0], "MatMul")
        q_scaled = scores and made_by(scores.input[0], "Mul")
        k_scaled = scores and made_by(scores.input[1], "Mul")
        if not (q_scaled and k_scaled):
            continue
        q, k, v = (projection(q_scaled.input[0]), projection(k_scaled.input[0]),
                   projection(context.input[1]))
        q_split = made_by(q_scaled.input[0], "Transpose")
        q_view = q_split and made_by(q_split.input[0], "Reshape")
        shape = q_view and made_by(q_view.input[1], "Concat")
        head_size = consts.get(shape.input[-1]) if shape else None
        scales = [consts.get(q_scaled.input[1]), consts.get(k_scaled.input[1])]
        if not (q and k and v) or head_size is None or any(x is None for x in scales):
            continue
        hidden = next(a.i for a in made_by(q.input[0], "MatMulNBits").attribute
                      if a.name == "N")
        size = int(np.asarray(head_size).reshape(-1)[0])
        if size <= 0 or hidden % size:
            continue
        scale = float(np.prod([np.asarray(x, dtype=np.float64).reshape(-1)[0]
                               for x in scales]))
        graph.node.remove(join)
        graph.node.insert(at, helper.make_node(
            "MultiHeadAttention", [q.output[0], k.output[0], v.output[0], "", mask],
            list(join.output), name=f"notewell_attention_{fused}", domain="com.microsoft",
            num_heads=hidden // size, scale=scale))
        fused += 1
    if fused:
        graph.node.insert(0, helper.make_node("Cast", ["attention_mask"], [mask],
                                              name="notewell_mask", to=TensorProto.INT32))
    return fused


def fuse_gelu(graph) -> int:
    """``x * 0.5 * (1 + erf(x / sqrt 2))`` after a bias ``Add`` as one ``BiasGelu``
    (onnxruntime's kernel for the same formula); the number fused."""
    from onnx import helper

    consts, made_by = _constants(graph), _made_by(graph)

    def const(name: str, value: float) -> bool:
        found = consts.get(name)
        return found is not None and found.size == 1 and abs(float(found) - value) < 1e-6

    fused = 0
    for at, out in enumerate(list(graph.node)):
        x = out.op_type == "Mul" and made_by(out.input[0], "Add")
        half = x and made_by(out.input[1], "Mul")
        one = half and const(half.input[0], 0.5) and made_by(half.input[1], "Add")
        erf = one and const(one.input[1], 1.0) and made_by(one.input[0], "Erf")
        div = erf and made_by(erf.input[0], "Div")
        if not (div and div.input[0] == x.output[0] and const(div.input[1], 2 ** 0.5)
                and x.input[1] in consts):
            continue
        graph.node.remove(out)
        graph.node.insert(at, helper.make_node(
            "BiasGelu", list(x.input), list(out.output), name=f"notewell_gelu_{fused}",
            domain="com.microsoft"))
        fused += 1
    return fused


def _constants(graph) -> dict[str, np.ndarray]:
    """The graph's initializers by name, as arrays."""
    from onnx import numpy_helper

    return {i.name: numpy_helper.to_array(i) for i in graph.initializer}


def _made_by(graph) -> Callable:
    """``made_by(name, op=None)``: the node whose output ``name`` is (None if there is
    none, or if ``op`` is given and it is another kind of node). Read before a fusion
    changes the graph: the nodes it finds are the ones the fusion matches."""
    producer = {out: node for node in graph.node for out in node.output}

    def made_by(name: str, op: str | None = None):
        node = producer.get(name)
        return node if node is not None and op in (None, node.op_type) else None

    return made_by


def _drop_unused(graph) -> None:
    """Remove nodes and initializers nothing reads any more (what fusing left behind)."""
    outputs = {o.name for o in graph.output}
    while True:
        used = outputs | {name for node in graph.node for name in node.input}
        dead = [n for n in graph.node if not any(out in used for out in n.output)]
        if not dead:
            break
        for node in dead:
            graph.node.remove(node)
    for init in list(graph.initializer):
        if init.name not in used:
            graph.initializer.remove(init)
