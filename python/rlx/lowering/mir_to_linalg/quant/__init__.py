"""mir-to-linalg for quantized weights: dequant_matmul, in the form IREE fuses into the matmul,
or on llvm-cpu decode through rlx's hand-written GEMV kernels.

Three steps, each a ``linalg.generic``:

1. **Repack**. A GGUF operand is the tensor's raw bytes ``[N, ROWBYTES]`` (``[N, G,
   BLOCKBYTES]`` after an expand; ``G = K / block``). Each field the dequant needs gets its
   own array, shaped for step 2: the bytes holding the quantized values (a copy of their
   range of the block, reshaped so that a byte is addressed by some of the dequant's
   loops), the scales as per-block / per-group arrays (``f16`` ``d``, 6-bit scales
   unpacked to bytes). Legacy ``[K, N]`` weights are transposed to rows here. These
   generics read only parameters and no array is larger than its parameter, so IREE
   hoists them into initializers: they run once, when the weights load.
2. **Dequant**: one all-parallel generic over ``[N, G, *group]`` (the block's elements
   split into loops so that every field is a projection of them). Its inputs are bytes; a
   value's bits are ``(byte >> shift) & mask`` with the shift read from a small constant
   table over the loops that pick bits within a byte; scales are broadcast through the
   maps; only ``arith`` in the body. That is IREE's "bit-extend" shape: it is cloned into
   the dispatch of the contraction that consumes it (for M = 1 on llvm-cpu at ``-O3``; for
   any M on CUDA and Vulkan), so the f32 weight never exists in memory.
3. **Contraction** over the same grouped space: ``x`` expanded to ``[M, G, *group]`` (read
   in the dequant's loop order), ``y[m, n] = Σ x[m, g, ...] W[n, g, ...]`` in f32, no
   reshape between 2 and 3. F16 / BF16 are plain mixed-precision matmuls instead. On
   llvm-cpu at M > 1 (data tiling) every GGUF scheme is dequantized K-major into the
   weight's data-tiling pack, and the contraction is f32 (:func:`.rule.fused_matmul`). On
   Vulkan at M != 1 the dequant is a dispatch of its own and the contraction a plain
   ``[M, K] x [N', K]`` one (:func:`.rule.separate_dequant`: fused, IREE's SPIR-V tiles
   overflow shared memory at real row widths).

The loop order is per target (:func:`.dequant.loop_order`), rows are padded for the SPIR-V
matvec (:func:`.dequant.padded_rows`), and sub-byte tensor types (``i4`` / ``i2`` through
``flow.tensor.bitcast``) are not used: IREE 3.13's SPIR-V backend crashes or fails to
legalize their vector bitcasts in these dispatches (Q4_K / Q2_K at M = 1, 3, 64). Every such
choice is recorded where it is made, with what was measured.

Every product in a dequant body whose result is then added to is exact in f32 (an f16
scale times integers of at most 6 + 5 bits), so a backend contracting ``a * q - b`` into an
FMA rounds exactly as the separate operations of ggml and the ``gguf`` package: the weights
are bit-exact on every target.

The modules, lowest first (each imports only those above it):

- :mod:`.scalars`: affine expressions over a generic's loops, ``arith`` scalar helpers;
- :mod:`.layouts`: the GGUF block layouts (fields, bit planes, weight formulas per scheme);
- :mod:`.dequant`: the building blocks: repacking and dequantizing generics, shift tables,
  loop orders, F16 / BF16 bit views;
- :mod:`.legacy`: the ``int8`` and NVFP4 schemes (``[K, N]`` weights);
- :mod:`.gemv_q8`: the kernels' ``activation_quant="q8"`` bodies (``x`` quantized to int8
  blocks in the kernel, integer block dot products: ``vpdpbusd`` / ``vpmaddubsw`` through
  ``llvm.call_intrinsic`` where the target CPU has them), an opt-in numerics mode;
- :mod:`.gemv_kernels` and :mod:`.gemv_planes`, side by side: the hand-written llvm-cpu
  decode GEMV kernels (their text on the shared skeleton of :mod:`..executable`) and the
  repacking that produces the operand planes those kernels read. They sit next to each
  other, not in a subpackage, because a plane's layout and the kernel's loads are one
  contract (tile interleave, lanes per chunk): a change to one is a change to the other;
- :mod:`.rule`: the registered ``dequant_matmul`` rule (kernel or fused form);
- :mod:`.f32_matmul`: an f32 ``matmul``'s prefill on a parameter weight through the same
  family's column-block GEMM (:func:`.gemm_prefill.f32_body`), which ``contraction`` calls;
- :mod:`.fuse`: the ``fuse-gemv-neighbours`` rewrite that ``mir-to-linalg`` runs first.
"""

from rlx.lowering.mir_to_linalg.quant import fuse, rule
from rlx.lowering.mir_to_linalg.quant.fuse import fuse_gemv_neighbours
from rlx.lowering.mir_to_linalg.quant.rule import lower_dequant_matmul

__all__ = ["fuse", "fuse_gemv_neighbours", "lower_dequant_matmul", "rule"]
