"""The entry points a vmfb exports: each function twice, over one body.

For every public function ``f`` of a lowered module, the body becomes the private
``f$body`` and two exports call it, written at IREE's ABI level (``iree.abi.stub``: IREE's
own wrapping leaves them as they are):

- ``f``, IREE's synchronous ABI: buffer views in, buffer views out, the call returns when
  the results are ready. This is what ``iree.runtime`` (``load_vm_flatbuffer_file``,
  ``SystemContext``), ``iree-run-module`` and any other IREE host calls the ordinary way.
- ``f$async``, IREE's coarse-fences ABI: the inputs, then a wait fence and a signal fence;
  the call returns once queued (``rlx.runtime``'s ``Function.submit``, the pipelined
  decode). ``iree-run-module`` supplies the fences when called with ``--function=f$async``.

``f`` calls ``f$async`` with a fresh signal fence and waits on it, and ``f$async`` is never
inlined (``#util.inline.never``), so the body is inlined once, into ``f$async``: IREE's
inliner would otherwise copy it into both exports, doubling the code and the weight
repacking it hoists into initializers. A failed wait (a device error) fails the call
with IREE's status.

Sketch of what is written for ``f(x: tensor<?x64xf32>) -> tensor<?x64xf32>``::

    util.func public @f$async(%x: !hal.buffer_view, %wait: !hal.fence, %signal: !hal.fence)
        -> !hal.buffer_view attributes {inlining_policy = #util.inline.never, ...} {
      %d0 = hal.buffer_view.dim<%x : !hal.buffer_view>[0] : index
      %t = hal.tensor.import wait(%wait) => %x "input0" : !hal.buffer_view -> tensor<?x64xf32>{%d0}
      %r = util.call @f$body(%t) : (tensor<?x64xf32>) -> tensor<?x64xf32>
      %rr = hal.tensor.barrier join(%r : tensor<?x64xf32>) => %signal : !hal.fence
      ... hal.tensor.export %rr "output0" ...
    }
    util.func public @f(%x: !hal.buffer_view) -> !hal.buffer_view {
      %signal = hal.fence.create device(...) flags("None") : !hal.fence
      %r = util.call @f$async(%x, %null, %signal)
      %status = hal.fence.await until([%signal]) timeout_millis(%c-1) ...
      util.status.check_ok %status
    }

With ``caller_transients`` (:mod:`rlx.transients`) both exports take one more input after
the tensors, a ``!hal.buffer`` (``f`` passes its own on): ``f$async`` marks each result
``hal.tensor.transients ... from %storage``, so IREE suballocates the call's transients from
that buffer instead of allocating them per call, and generates the export
``f$async_transients_size`` (the same inputs; the bytes needed).
"""

from __future__ import annotations

from iree.compiler import ir
from iree.compiler.dialects import arith, func, hal, tensor, util

ASYNC_SUFFIX = "$async"
"""The coarse-fences export of ``f`` is ``f$async`` (IREE's own name for such a twin)."""
BODY_SUFFIX = "$body"
ABI_MODEL = "coarse-fences"


def _hal_type(name: str) -> ir.Type:
    """``!hal.<name>`` (the bindings have no Python class for HAL types)."""
    return ir.Type.parse(f"!hal.{name}")


def _no_flags() -> ir.Attribute:
    """The empty flag set of ``hal.fence.create`` / ``hal.fence.await``."""
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)


def declaration(kind: str, name: str, inputs: list[ir.Type], results: list[ir.Type],
                names: list[str], transients: bool = False) -> str:
    """IREE's ``iree.abi.declaration`` text (``sync func @f(%x: ...) -> (%output0: ...)``)
    with the user's input names (and the caller's transients buffer after them)."""
    args = ", ".join([f"%{n}: {t}" for n, t in zip(names, inputs, strict=True)]
                     + ["%transients: !hal.buffer {iree.abi.transients}"] * transients)
    outs = ", ".join(f"%output{i}: {t}" for i, t in enumerate(results))
    return f"{kind} func @{name}({args}) -> ({outs})"


def _input_names(func: ir.Operation, count: int) -> list[str]:
    """The ``rlx.name`` of each argument (``input<i>`` where none is given)."""
    names = [f"input{i}" for i in range(count)]
    if "arg_attrs" in func.attributes:
        for i, attrs in enumerate(ir.ArrayAttr(func.attributes["arg_attrs"])):
            d = ir.DictAttr(attrs)
            if "rlx.name" in d:
                names[i] = ir.StringAttr(d["rlx.name"]).value
    return names


def _reflection(func: ir.Operation, extra: dict[str, str]) -> ir.DictAttr:
    entries: dict[str, ir.Attribute] = {}
    if "iree.reflection" in func.attributes:
        for named in ir.DictAttr(func.attributes["iree.reflection"]):
            entries[named.name] = named.attr
    entries.update({k: ir.StringAttr.get(v) for k, v in extra.items()})
    return ir.DictAttr.get(entries)


def _stub(name: str, inputs: list[ir.Type], results: list[ir.Type],
          reflection: ir.DictAttr, never_inline: bool) -> util.FuncOp:
    policy = ir.Attribute.parse("#util.inline.never") if never_inline else None
    fn = util.FuncOp(name, ir.TypeAttr.get(ir.FunctionType.get(inputs, results)),
                     sym_visibility="public", inlining_policy=policy)
    fn.attributes["iree.abi.stub"] = ir.UnitAttr.get()
    fn.attributes["iree.reflection"] = reflection
    fn.regions[0].blocks.append(*inputs)
    return fn


def _tensor_dims(value: ir.Value) -> list[ir.Value]:
    """The dynamic dims of a tensor (``tensor.dim``)."""
    t = ir.RankedTensorType(value.type)
    return [tensor.dim(value, arith.constant(ir.IndexType.get(), i))
            for i in range(t.rank) if t.is_dynamic_dim(i)]


def _build_async(body: ir.Operation, name: str, reflection: ir.DictAttr,
                 transients: bool) -> util.FuncOp:
    ftype = ir.FunctionType(ir.TypeAttr(body.attributes["function_type"]).value)
    bv, fence = _hal_type("buffer_view"), _hal_type("fence")
    ins, outs = list(ftype.inputs), list(ftype.results)
    storage = [_hal_type("buffer")] if transients else []
    fn = _stub(name + ASYNC_SUFFIX, [bv] * len(ins) + storage + [fence, fence],
               [bv] * len(outs), reflection, never_inline=True)
    block = fn.regions[0].blocks[0]
    n = len(ins) + len(storage)
    wait, signal = block.arguments[n], block.arguments[n + 1]
    with ir.InsertionPoint(block):
        imported = []
        for i, t in enumerate(ins):
            arg = block.arguments[i]
            rt = ir.RankedTensorType(t)
            dims = [hal.BufferViewDimOp(arg, j).result for j in range(rt.rank)
                    if rt.is_dynamic_dim(j)]
            imported.append(hal.TensorImportOp(t, arg, ir.TypeAttr.get(t), dims,
                                               wait_fence=wait, name=f"input{i}").result)
        # func.call: the body is still a func.func (IREE makes it a util.func later)
        call = func.CallOp(outs, ir.FlatSymbolRefAttr.get(name + BODY_SUFFIX), imported)
        results = list(call.results)
        if transients:
            results = [hal.TensorTransientsOp(r, _tensor_dims(r), block.arguments[len(ins)],
                                              results=[r.type]).result for r in results]
        if results:
            results = list(hal.TensorBarrierOp(outs, results, signal).results)
        else:
            hal.FenceSignalOp(signal)
        exported = [hal.TensorExportOp(bv, r, ir.TypeAttr.get(r.type),
                                       _tensor_dims(r), name=f"output{i}").result
                    for i, r in enumerate(results)]
        util.ReturnOp(exported)
    return fn


def _build_sync(name: str, n_in: int, n_out: int, reflection: ir.DictAttr,
                transients: bool) -> util.FuncOp:
    bv, fence = _hal_type("buffer_view"), _hal_type("fence")
    storage = [_hal_type("buffer")] if transients else []
    fn = _stub(name, [bv] * n_in + storage, [bv] * n_out, reflection, never_inline=False)
    block = fn.regions[0].blocks[0]
    with ir.InsertionPoint(block):
        device = hal.DevicesGetOp(arith.constant(ir.IndexType.get(), 0),
                                  results=[_hal_type("device")]).result
        signal = hal.FenceCreateOp(device, _no_flags(),
                                   results=[fence]).result
        wait = util.NullOp(fence).result
        call = util.CallOp([bv] * n_out, ir.FlatSymbolRefAttr.get(name + ASYNC_SUFFIX),
                           [*block.arguments, wait, signal])
        forever = arith.constant(ir.IntegerType.get_signless(32), -1)
        status = hal.FenceAwaitOp(forever, _no_flags(),
                                  [signal], results=[ir.IntegerType.get_signless(32)]).result
        util.status_check_ok(status, message=f"error: waiting for the results of {name}")
        util.ReturnOp(list(call.results))
    return fn


def add_exports(module: ir.Module, transients: bool = False) -> None:
    """Give each public function ``f`` its ``f`` (synchronous) and ``f$async``
    (coarse-fences) exports over one private body ``f$body`` (see the module docstring);
    ``transients``: both take the caller's transients buffer after the tensors."""
    with module.context, ir.Location.unknown():
        publics = [op.operation for op in module.body.operations
                   if op.operation.name == "func.func" and (
                       "sym_visibility" not in op.operation.attributes or ir.StringAttr(
                           op.operation.attributes["sym_visibility"]).value == "public")]
        for body in publics:
            name = ir.StringAttr(body.attributes["sym_name"]).value
            ftype = ir.FunctionType(ir.TypeAttr(body.attributes["function_type"]).value)
            ins, outs = list(ftype.inputs), list(ftype.results)
            names = _input_names(body, len(ins))
            sync_refl = _reflection(body, {
                "iree.abi.declaration": declaration("sync", name, ins, outs, names, transients)})
            async_refl = _reflection(body, {
                "iree.abi.declaration": declaration("async", name, ins, outs, names,
                                                    transients),
                "iree.abi.model": ABI_MODEL})
            ir.SymbolTable.replace_all_symbol_uses(name, name + BODY_SUFFIX,
                                                   module.operation)
            ir.SymbolTable.set_symbol_name(body, name + BODY_SUFFIX)
            body.attributes["sym_visibility"] = ir.StringAttr.get("private")
            if "iree.reflection" in body.attributes:
                del body.attributes["iree.reflection"]
            with ir.InsertionPoint(module.body), body.location:
                _build_async(body, name, async_refl, transients)
                _build_sync(name, len(ins), len(outs), sync_refl, transients)


__all__ = ["ABI_MODEL", "ASYNC_SUFFIX", "add_exports", "declaration"]
