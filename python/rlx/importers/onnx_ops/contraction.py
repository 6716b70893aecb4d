"""ONNX contractions: MatMul, Gemm, and Einsum (decomposed into transposes, reshapes,
diagonal masks, sums and one batched matmul per pair of operands)."""

from __future__ import annotations

import math
import re

import numpy as np

from rlx.dialects.builder import HirValue
from rlx.importers.dims import SymDim, normalize
from rlx.importers.onnx_ops.registry import Node, Value, converter
from rlx.importers.onnx_ops.shape import reshape_to
from rlx.ir.types import Dim


def float_matmul_operand(node: Node, i: int) -> HirValue:
    v = node.tensor(i)
    if not v.dtype.is_float:
        node.fail(f"input {i} is {v.dtype}; rlx multiplies float matrices (use "
                  "MatMulInteger-free float graphs)")
    return v


def matmul(node: Node, a: HirValue, b: HirValue) -> HirValue:
    """numpy ``matmul``: 1-D operands gain a dim that the result drops again."""
    ra, rb = len(a.shape), len(b.shape)
    if ra == 0 or rb == 0:
        node.fail("MatMul of a scalar")
    a2 = reshape_to(node, a, [1, a.shape[0]]) if ra == 1 else a
    b2 = reshape_to(node, b, [b.shape[0], 1]) if rb == 1 else b
    y = node.mir("matmul", [a2, b2])
    if ra > 1 and rb > 1:
        return y
    dims: list[Dim] = list(y.shape)
    if rb == 1:
        dims.pop(-1)
    if ra == 1:
        dims.pop(-2 if rb > 1 else -1)
    return reshape_to(node, y, dims)


@converter("MatMul")
def convert_matmul(node: Node) -> list[Value]:
    return [matmul(node, float_matmul_operand(node, 0), float_matmul_operand(node, 1))]


@converter("Gemm", since=7)
def convert_gemm(node: Node) -> list[Value]:
    """``alpha A' B' + beta C`` (A', B' optionally transposed; C broadcast)."""
    operands = []
    for i, flag in ((0, "transA"), (1, "transB")):
        const = node.maybe_const(i)
        if node.attr(flag, 0) and const is not None:
            operands.append(node.as_tensor(const.T.copy(), f"{node.proto.input[i]}.T"))
            continue
        v = float_matmul_operand(node, i)
        if len(v.shape) != 2:
            node.fail(f"input {i} is {v.type}; Gemm multiplies 2-D matrices")
        operands.append(node.mir("transpose", [v], perm=[1, 0]) if node.attr(flag, 0) else v)
    y = node.mir("matmul", operands)
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    if alpha != 1.0:
        y = node.mir("binary", [y, node.scalar(alpha, y)], kind="mul")
    if node.has(2) and beta != 0.0:
        c = node.tensor(2)
        if beta != 1.0:
            c = node.mir("binary", [c, node.scalar(beta, c)], kind="mul")
        y = node.mir("binary", [y, c], kind="add")
    return [y]


# --------------------------------------------------------------------------------------
# Einsum
# --------------------------------------------------------------------------------------

Labels = list[str]


def parse_einsum(node: Node, equation: str, ranks: list[int]) -> tuple[list[Labels], Labels]:
    """Operand and output labels; ``...`` becomes labels ``.0``, ``.1``, ...
    right-aligned across operands (explicit output, or ONNX's implicit one: the ellipsis,
    then the letters used once, sorted)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks) or not re.fullmatch(r"[A-Za-z.,]*", lhs) or (
            arrow and not re.fullmatch(r"[A-Za-z.]*", rhs)):
        node.fail(f"equation {equation!r} for {len(ranks)} operands")
    widths = []
    for term, r in zip(terms, ranks, strict=True):
        letters = len(term.replace("...", ""))
        if "..." not in term and letters != r:
            node.fail(f"equation term {term!r} for a rank-{r} operand")
        widths.append(r - letters if "..." in term else 0)
    ell = max(widths, default=0)
    labels = []
    for term, width in zip(terms, widths, strict=True):
        pre, _, post = term.partition("...")
        middle = [f".{k}" for k in range(ell - width, ell)] if "..." in term else []
        labels.append([*pre, *middle, *post])
    if arrow:
        pre, _, post = rhs.partition("...")
        out = [*pre, *([f".{k}" for k in range(ell)] if "..." in rhs else []), *post]
    else:
        letters = [c for term in terms for c in term.replace("...", "")]
        out = [f".{k}" for k in range(ell)] + sorted(c for c in set(letters)
                                                     if letters.count(c) == 1)
    return labels, out


def _take_diagonals(node: Node, v: HirValue, labels: Labels) -> tuple[HirValue, Labels]:
    """Repeated labels in one operand: keep the diagonal (mask with an identity, sum)."""
    labels = list(labels)
    while len(set(labels)) != len(labels):
        p = next(i for i, lab in enumerate(labels) if labels.count(lab) > 1)
        q = labels.index(labels[p], p + 1)
        n = v.shape[p]
        if n is None:
            node.fail("a diagonal over a dynamic dim")
        shape = [1] * len(labels)
        shape[p] = shape[q] = n
        eye = np.eye(n).reshape(shape).astype(np.asarray(node.scalar(0, v)).dtype)
        masked = node.mir("binary", [v, eye], kind="mul")
        v = node.mir("reduce", [masked], kind="sum", axes=[q], keep_dim=False)
        labels.pop(q)
    return v, labels


def _sum_out(node: Node, v: HirValue, labels: Labels, keep: set[str]
             ) -> tuple[HirValue, Labels]:
    axes = [i for i, lab in enumerate(labels) if lab not in keep]
    if not axes:
        return v, labels
    y = node.mir("reduce", [v], kind="sum", axes=axes, keep_dim=False)
    return y, [lab for lab in labels if lab in keep]


def _permuted(node: Node, v: HirValue, labels: Labels, order: Labels) -> HirValue:
    perm = [labels.index(lab) for lab in order]
    return v if perm == list(range(len(perm))) else node.mir("transpose", [v], perm=perm)


def _contract(node: Node, a: HirValue, la: Labels, b: HirValue, lb: Labels, keep: set[str]
              ) -> tuple[HirValue, Labels]:
    """One batched matmul: ``[batch, a_only, summed] x [batch, summed, b_only]``, over the
    operands' sizes as the importer knows them (dynamic ones as symbols: Funnel's and
    XLNet's relative-position einsums over a dynamic sequence); a group of several dynamic
    dims is one reshape where :func:`.shape.reshape_to` can say it, else its error."""
    sizes: dict[str, SymDim] = {}
    da, db = node.dims_of(a), node.dims_of(b)
    for dims, labels in ((da, la), (db, lb)):
        for lab, d in zip(labels, dims, strict=True):
            if sizes.get(lab, 1) == 1:          # a broadcast 1 takes the other's size
                sizes[lab] = d
    batch = [lab for lab in la if lab in lb and lab in keep]
    summed = [lab for lab in la if lab in lb and lab not in keep]
    a_only = [lab for lab in la if lab not in lb]
    b_only = [lab for lab in lb if lab not in la]

    def batch_dims(dims: list[SymDim], labels: Labels) -> list[SymDim]:
        return [dims[labels.index(lab)] for lab in batch]

    def prod(labels: Labels) -> SymDim:
        return normalize(math.prod(sizes[lab] for lab in labels))

    def grouped(v: Value, target: list[SymDim]) -> HirValue:
        y = reshape_to(node, node.as_tensor(v), target)
        return node.as_tensor(y)

    a3 = grouped(_permuted(node, a, la, batch + a_only + summed),
                 [*batch_dims(da, la), prod(a_only), prod(summed)])
    b3 = grouped(_permuted(node, b, lb, batch + summed + b_only),
                 [*batch_dims(db, lb), prod(summed), prod(b_only)])
    for v, what in ((a3, "first"), (b3, "second")):
        if not v.dtype.is_float:
            node.fail(f"the {what} operand is {v.dtype}; rlx contracts float tensors")
    y = node.mir("matmul", [a3, b3])
    labels = batch + a_only + b_only
    return grouped(y, [sizes[lab] for lab in labels]), labels


@converter("Einsum", since=12)
def convert_einsum(node: Node) -> list[Value]:
    operands = [node.tensor(i) for i in range(node.n_inputs)]
    labels, out = parse_einsum(node, node.attr("equation"), [len(v.shape) for v in operands])
    items = [_take_diagonals(node, v, lab) for v, lab in zip(operands, labels, strict=True)]
    for k, (v, lab) in enumerate(items):
        later = {x for _, ls in items[:k] + items[k + 1:] for x in ls}
        items[k] = _sum_out(node, v, lab, later | set(out))
    v, lab = items[0]
    for k in range(1, len(items)):
        later = {x for _, ls in items[k + 1:] for x in ls} | set(out)
        v, lab = _contract(node, v, lab, *items[k], later)
    v, lab = _sum_out(node, v, lab, set(out))
    if sorted(lab) != sorted(out):
        node.fail(f"equation {node.attr('equation')!r}: output labels {out} are not all in "
                  "the operands")
    return [_permuted(node, v, lab, out)]
