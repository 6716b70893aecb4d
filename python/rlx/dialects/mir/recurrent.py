"""MIR recurrent ops: gated_delta_net, lstm, gru (same rules as their HIR blocks)."""

from __future__ import annotations

from rlx.dialects.hir.recurrent import (
    GDN_ATTRS,
    GDN_OPERANDS,
    GDN_RESULTS,
    GRU_OPERANDS,
    LSTM_OPERANDS,
    carry,
    gdn_results,
    gru_attrs,
    lstm_attrs,
    rnn_results,
)
from rlx.dialects.mir.dialect import MIR
from rlx.dialects.schema import Check, Operand
from rlx.ir.types import TensorInfo


@MIR.op("gated_delta_net", operands=GDN_OPERANDS, attrs=GDN_ATTRS, results=GDN_RESULTS)
def gated_delta_net(c: Check) -> list[TensorInfo]:
    """Gated DeltaNet scan (``Op::GatedDeltaNet``); as ``rlx_hir.gated_delta_net``.

    Example::

        %y = "rlx_mir.gated_delta_net"(%q, %k, %v, %g, %beta)
              {carry_state = false, state_size = 8 : i64}
            : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>,
               tensor<1x4x2xf32>, tensor<1x4x2xf32>) -> tensor<1x4x2x8xf32>
    """
    return gdn_results(c)


@MIR.op("lstm", operands=LSTM_OPERANDS, attrs=lstm_attrs(),
        results=["y", Operand("hn", when=carry), Operand("cn", when=carry)])
def lstm(c: Check) -> list[TensorInfo]:
    """Packed multi-layer LSTM (``Op::Lstm``); as ``rlx_hir.lstm``.

    Example::

        %y = "rlx_mir.lstm"(%x, %wih, %whh, %b) {bidirectional = false, carry = false,
              hidden_size = 16 : i64, num_layers = 1 : i64}
            : (tensor<1x5x8xf32>, tensor<64x8xf32>, tensor<64x16xf32>, tensor<64xf32>)
            -> tensor<1x5x16xf32>
    """
    return rnn_results(c, 4, ("bias",), ("h0", "c0"))


@MIR.op("gru", operands=GRU_OPERANDS, attrs=gru_attrs(), results=["y", Operand("hn", when=carry)])
def gru(c: Check) -> list[TensorInfo]:
    """Packed multi-layer GRU (``Op::Gru``); as ``rlx_hir.gru``.

    Example::

        %y = "rlx_mir.gru"(%x, %wih, %whh, %bih, %bhh) {bidirectional = false,
              carry = false, hidden_size = 16 : i64, num_layers = 1 : i64}
            : (tensor<1x5x8xf32>, tensor<48x8xf32>, tensor<48x16xf32>, tensor<48xf32>,
               tensor<48xf32>) -> tensor<1x5x16xf32>
    """
    return rnn_results(c, 3, ("b_ih", "b_hh"), ("h0",))
