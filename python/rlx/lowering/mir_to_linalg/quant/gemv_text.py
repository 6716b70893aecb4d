"""Pieces of MLIR text shared by the decode GEMV kernels (:mod:`.gemv_kernels`, one row of
``x``) and their batched form (:mod:`.gemv_batched`, ``M`` rows): the loop over a
workgroup's row tiles and affine indices into the tile-interleaved planes."""

from __future__ import annotations

from rlx.lowering.mir_to_linalg.executable import Text

ROWS_PER_TILE = 4
"""Rows a kernel loop iteration accumulates at once (four 16-lane partial sums); the weight
planes interleave each tile of this many rows (:func:`.gemv_planes.interleave_tiles`)."""


def rows_loop(t: Text, rows: int) -> None:
    """Open the loop over the row tiles of a workgroup of ``rows`` rows; defines %tile (the
    row of the interleaved planes, ``wg · rows / 4 + tl`` with ``tl < rows / 4``) and its
    rows %r0..%r3."""
    t(f"%c_tiles = arith.constant {rows // ROWS_PER_TILE} : index")
    t(f"%c_tile = arith.constant {ROWS_PER_TILE} : index")
    t("%tile0 = arith.muli %wg, %c_tiles : index")
    t.block("scf.for %tl = %c0 to %c_tiles step %c1")
    t("%tile = arith.addi %tile0, %tl : index")
    t("%r0 = arith.muli %tile, %c_tile : index")
    for i in range(1, ROWS_PER_TILE):
        t(f"%r{i} = arith.addi %r{i - 1}, %c1 : index")


def at(name: str, stride: int, offset: int) -> str:
    """An index ``name * stride + offset`` (an affine.apply's right-hand side)."""
    return f"affine.apply affine_map<()[s0] -> (s0 * {stride} + {offset})>()[{name}]"


__all__ = ["ROWS_PER_TILE", "at", "rows_loop"]
