"""ONNX activations: Relu, Gelu, LeakyRelu, PRelu, Elu, Selu, Celu, ThresholdedRelu,
HardSigmoid, HardSwish, Softplus, Softsign, Mish, Swish, Shrink.

Each is ``rlx_mir.activation`` where MIR has the function, else a few ``binary`` /
``compare`` / ``where`` ops written from the ONNX operator specification's formula.
"""

from __future__ import annotations

from rlx.dialects.builder import HirValue
from rlx.importers.onnx_ops.elementwise import float_input
from rlx.importers.onnx_ops.registry import Node, Value, converter


def _mul(node: Node, x: HirValue, k: float) -> HirValue:
    return node.mir("binary", [x, node.scalar(k, x)], kind="mul")


def _expm1(node: Node, x: HirValue) -> HirValue:
    return node.mir("binary", [node.mir("activation", [x], kind="exp"), node.scalar(1.0, x)],
                    kind="sub")


@converter("Relu")
def convert_relu(node: Node) -> list[Value]:
    x = node.tensor(0)
    if x.dtype.is_float:
        return [node.mir("activation", [x], kind="relu")]
    return [node.mir("binary", [x, node.scalar(0, x)], kind="max")]


@converter("Gelu", since=20)
def convert_gelu(node: Node) -> list[Value]:
    approximate = node.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        node.fail(f"attribute approximate = {approximate!r}: expected 'none' or 'tanh'")
    kind = "gelu" if approximate == "none" else "gelu_approx"
    return [node.mir("activation", [float_input(node)], kind=kind)]


@converter("LeakyRelu")
def convert_leaky_relu(node: Node) -> list[Value]:
    x = float_input(node)
    scaled = node.mir("binary", [x, node.scalar(node.attr("alpha", 0.01), x)], kind="mul")
    negative = node.mir("compare", [x, node.scalar(0.0, x)], kind="lt")
    return [node.mir("where", [negative, scaled, x])]


@converter("HardSigmoid", "HardSwish")
def convert_hard_sigmoid(node: Node) -> list[Value]:
    """``max(0, min(1, alpha x + beta))`` (HardSwish: ``x`` times that, alpha 1/6, beta
    1/2)."""
    x = float_input(node)
    alpha, beta = ((node.attr("alpha", 0.2), node.attr("beta", 0.5))
                   if node.op_type == "HardSigmoid" else (1.0 / 6.0, 0.5))
    y = node.mir("binary", [node.mir("binary", [x, node.scalar(alpha, x)], kind="mul"),
                            node.scalar(beta, x)], kind="add")
    y = node.mir("binary", [node.mir("binary", [y, node.scalar(1.0, x)], kind="min"),
                            node.scalar(0.0, x)], kind="max")
    return [y if node.op_type == "HardSigmoid" else node.mir("binary", [x, y], kind="mul")]


@converter("Softplus")
def convert_softplus(node: Node) -> list[Value]:
    """``log(1 + exp(x))`` as ``max(x, 0) + log(1 + exp(-|x|))`` (no overflow)."""
    x = float_input(node)
    tail = node.mir("activation", [node.mir("activation", [x], kind="abs")], kind="neg")
    log1p = node.mir("activation", [node.mir("binary", [
        node.scalar(1.0, x), node.mir("activation", [tail], kind="exp")], kind="add")],
        kind="log")
    return [node.mir("binary", [node.mir("binary", [x, node.scalar(0.0, x)], kind="max"),
                                log1p], kind="add")]


@converter("PRelu", since=7)
def convert_prelu(node: Node) -> list[Value]:
    """``slope x`` where ``x < 0``; the slope broadcasts to ``x`` (per channel: ``[C, 1,
    1]`` for images)."""
    x = float_input(node)
    slope = node.tensor(1)
    if slope.dtype != x.dtype:
        node.fail(f"slope is {slope.dtype}, x is {x.dtype}: expected one type")
    negative = node.mir("compare", [x, node.scalar(0.0, x)], kind="lt")
    return [node.mir("where", [negative, node.mir("binary", [x, slope], kind="mul"), x])]


@converter("Celu", since=12)
@converter("Elu", since=6)
def convert_elu(node: Node) -> list[Value]:
    """Elu: ``alpha (exp(x) - 1)`` where ``x < 0``, else ``x``. Celu: ``max(0, x) + min(0,
    alpha (exp(x / alpha) - 1))``."""
    x = float_input(node)
    alpha = float(node.attr("alpha", 1.0))
    negative = node.mir("compare", [x, node.scalar(0.0, x)], kind="lt")
    scaled = x if node.op_type == "Elu" else _mul(node, x, 1.0 / alpha)
    return [node.mir("where", [negative, _mul(node, _expm1(node, scaled), alpha), x])]


@converter("Selu", since=6)
def convert_selu(node: Node) -> list[Value]:
    """``gamma (alpha exp(x) - alpha)`` where ``x <= 0``, else ``gamma x``."""
    x = float_input(node)
    alpha = float(node.attr("alpha", 1.67326319217681884765625))
    gamma = float(node.attr("gamma", 1.05070102214813232421875))
    low = node.mir("binary", [_mul(node, node.mir("activation", [x], kind="exp"), alpha),
                              node.scalar(alpha, x)], kind="sub")
    positive = node.mir("compare", [x, node.scalar(0.0, x)], kind="gt")
    return [_mul(node, node.mir("where", [positive, x, low]), gamma)]


@converter("ThresholdedRelu", since=10)
def convert_thresholded_relu(node: Node) -> list[Value]:
    """``x`` where ``x > alpha``, else 0."""
    x = float_input(node)
    above = node.mir("compare", [x, node.scalar(node.attr("alpha", 1.0), x)], kind="gt")
    return [node.mir("where", [above, x, node.scalar(0.0, x)])]


@converter("Softsign")
def convert_softsign(node: Node) -> list[Value]:
    """``x / (1 + |x|)``."""
    x = float_input(node)
    return [node.mir("binary", [x, node.mir("binary", [
        node.scalar(1.0, x), node.mir("activation", [x], kind="abs")], kind="add")],
        kind="div")]


@converter("Mish", since=18)
def convert_mish(node: Node) -> list[Value]:
    """``x tanh(softplus(x))``."""
    x = float_input(node)
    t = node.mir("activation", [node.mir("activation", [x], kind="softplus")], kind="tanh")
    return [node.mir("binary", [x, t], kind="mul")]


@converter("Swish", since=24)
def convert_swish(node: Node) -> list[Value]:
    """``x sigmoid(alpha x)`` (``silu`` for alpha 1)."""
    x = float_input(node)
    alpha = float(node.attr("alpha", 1.0))
    if alpha == 1.0:
        return [node.mir("activation", [x], kind="silu")]
    s = node.mir("activation", [_mul(node, x, alpha)], kind="sigmoid")
    return [node.mir("binary", [x, s], kind="mul")]


@converter("Shrink", since=9)
def convert_shrink(node: Node) -> list[Value]:
    """``x + bias`` where ``x < -lambd``, ``x - bias`` where ``x > lambd``, else 0 (float
    inputs)."""
    x = float_input(node)
    lambd, bias = float(node.attr("lambd", 0.5)), float(node.attr("bias", 0.0))
    below = node.mir("compare", [x, node.scalar(-lambd, x)], kind="lt")
    above = node.mir("compare", [x, node.scalar(lambd, x)], kind="gt")
    up = node.mir("binary", [x, node.scalar(bias, x)], kind="add")
    down = node.mir("binary", [x, node.scalar(bias, x)], kind="sub")
    return [node.mir("where", [below, up, node.mir("where", [above, down,
                                                            node.scalar(0.0, x)])])]
