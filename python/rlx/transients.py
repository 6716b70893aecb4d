"""Caller-owned transient memory: one arena per exported function, kept between calls.

A function compiled with ``caller_transients=True`` (:mod:`rlx.lowering.exports`) takes one
more input after its tensors, a ``!hal.buffer`` that IREE suballocates every transient of
the call from (IREE's external transients: ``hal.tensor.transients`` on the results, the
``iree-stream-emplace-transients`` pass, and a generated ``<f>$async_transients_size``
export that computes the bytes a call needs from its inputs' sizes). Without it IREE
allocates the transients of each call when the call runs and frees them after: a
dynamic-length prefill's are the sum of all of them (123 MB for the 135M model at 512
tokens), above glibc's mmap threshold, so every call maps fresh pages and takes ~40K page
faults zeroing them.

:class:`Arena` holds the buffer: it asks the size query (or reads the constant IREE
annotated where the size does not depend on the inputs), grows the buffer when a call
needs more, and orders the calls that share it. IREE's contract (the op's documentation)
is that the storage is usable when the call starts: the caller synchronizes. So each call
waits, on the device, for the previous call that used the arena (its signal fence joins
the call's wait fence), and a buffer is only let go of once the call using it has finished.

Memory safety: IREE 3.13's emplacement does not compare the buffer's length with what the
call needs (``EmplaceTransients.cpp``: "TODO(benvanik): add runtime validation that packed
size fits in storage size ... For now we just trust the user"): a buffer too small would
have the dispatches write past it. So rlx adds the check itself (:func:`add_size_checks`,
between IREE's ``stream`` phase and the rest of the compile): every export that takes the
buffer first calls its own size query and fails the call (``OUT_OF_RANGE``, the message
naming the query) when the buffer is shorter, for any caller (``iree-run-module`` included).
:meth:`Arena.storage` always passes one of at least the queried size.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

SIZE_QUERY = "iree.abi.transients.size"
"""The reflection entry naming a function's size query export."""
SIZE_CONSTANT = "iree.abi.transients.size.constant"
"""The reflection entry IREE adds where the query folds to a constant."""
IREE_ERRORS = (RuntimeError, ValueError, IndexError)
"""What iree.runtime raises for a failed status (``OUT_OF_RANGE`` is an IndexError,
``INVALID_ARGUMENT`` a ValueError, the others RuntimeError)."""
GRANULE = 1 << 16
"""Arena sizes are rounded up to this many bytes (a prompt one token longer than the
longest so far usually fits without a new buffer)."""


_EXPORT = re.compile(r"^(\s*)util\.func public @(\S+?)\((.*?)\) -> .*"
                     r"iree\.abi\.transients\.size = @([^\s,}]+).*\{$")
_ARG = re.compile(r"(%arg\d+): (!hal\.[a-z_]+)")
OUT_OF_RANGE = 11
"""IREE's status code for a buffer shorter than the call needs."""


def add_size_checks(text: str) -> tuple[str, int]:
    """The ``stream``-phase module ``text`` with a size check at the top of every export
    that takes caller transients, and how many it added (see the module docstring)."""
    lines = text.split("\n")
    out: list[str] = []
    added = 0
    for line in lines:
        out.append(line)
        m = _EXPORT.match(line)
        if m is None:
            continue
        indent, name, args, query = m.groups()
        params = _ARG.findall(args)
        storage = [a for a, t in params if t == "!hal.buffer"]
        if len(storage) != 1:
            raise ValueError(f"@{name}: expected one !hal.buffer argument, found {args!r}")
        names = ", ".join(a for a, _ in params)
        types = ", ".join(t for _, t in params)
        message = (f"error: {name.removesuffix('$async')}: the transients buffer is shorter "
                   f"than {query} gives for these inputs")
        pad = indent + "  "
        out += [f"{pad}%rlx_need = util.call @{query}({names}) : ({types}) -> index",
                f"{pad}%rlx_have = hal.buffer.length<{storage[0]} : !hal.buffer> : index",
                f"{pad}%rlx_fits = arith.cmpi ule, %rlx_need, %rlx_have : index",
                f"{pad}%rlx_ok = arith.constant 0 : i32",
                f"{pad}%rlx_short = arith.constant {OUT_OF_RANGE} : i32",
                f"{pad}%rlx_status = arith.select %rlx_fits, %rlx_ok, %rlx_short : i32",
                f'{pad}util.status.check_ok %rlx_status, "{message}"']
        added += 1
    return "\n".join(out), added


def compile_checked(tool: str, src: Path, flags: list[str], dst: Path
                    ) -> subprocess.CompletedProcess[str]:
    """``tool src flags -o dst`` (iree-compile) in two parts, up to and after IREE's
    ``stream`` phase, with :func:`add_size_checks` between them. The result of the part
    that failed, or of the second."""
    mid = dst.with_suffix(".stream.mlir")
    first = subprocess.run([tool, str(src), *flags, "--compile-to=stream", "-o", str(mid)],
                           capture_output=True, text=True)
    if first.returncode != 0:
        return first
    try:
        text, added = add_size_checks(mid.read_text())
    except ValueError as e:  # an export rlx did not write: reported as the compile's error
        return subprocess.CompletedProcess(first.args, 1, "", f"error: {e}")
    if not added:
        return subprocess.CompletedProcess(first.args, 1, "", "error: rlx found no export "
                                           "that takes caller transients to check")
    mid.write_text(text)
    # the encoder is split off before the stream phase: the first part wrote it
    rest = [f for f in flags if not f.startswith("--iree-parameter-encoder-output-file")]
    return subprocess.run([tool, str(mid), *rest, "--compile-from=stream", "-o", str(dst)],
                          capture_output=True, text=True)


def is_size_query(name: str, names: set[str]) -> bool:
    """Whether export ``name`` is IREE's size query of another export (not a user function)."""
    return name.endswith("_transients_size") and name.removesuffix("_transients_size") in names


class Arena:
    """The transient storage of one function (see the module docstring)."""

    def __init__(self, vm_module: Any, reflection: dict[str, str]) -> None:
        constant = reflection.get(SIZE_CONSTANT)
        self.constant = int(constant) if constant is not None else None
        self._query = (None if self.constant is not None
                       else vm_module.lookup_function(reflection[SIZE_QUERY]))
        self.buffer: Any = None
        self.last: Any = None
        """The signal fence of the last call given :attr:`buffer` (None: none queued)."""
        self._semaphore: Any = None

    @property
    def size(self) -> int:
        """The bytes of :attr:`buffer` (0 without one)."""
        return 0 if self.buffer is None else int(self.buffer.byte_length())

    def queued(self, signal: Any, semaphore: Any) -> None:
        """The call just queued with :attr:`buffer` signals ``signal`` (at 1 on
        ``semaphore``) when it is done: the next call waits for it."""
        self.last, self._semaphore = signal, semaphore

    def bytes_for(self, context: Any, inputs: list[Any]) -> int:
        """The bytes a call with these input buffer views needs (the size query takes the
        function's own inputs: the views, the storage, which it does not read, and two
        fences)."""
        if self.constant is not None:
            return self.constant
        import iree.runtime as rt

        args = rt.VmVariantList(len(inputs) + 3)
        for bv in inputs:
            args.push_ref(bv)
        args.push_ref(self.buffer)
        args.push_ref(rt.HalFence(1))
        args.push_ref(rt.HalFence(1))
        out = rt.VmVariantList(1)
        context.vm_context.invoke(self._query, args, out)
        return int(out.get_variant(0))

    def storage(self, context: Any, inputs: list[Any]) -> Any:
        """The buffer for the next call with these input buffer views: the arena's, grown
        first if the call needs more (once the call that used the old one has finished)."""
        if self.last is not None:
            try:
                self._semaphore.query()
            except IREE_ERRORS:
                self.drop()  # the last call failed on the device: its fence fails all after
        if self.buffer is None:
            self._allocate(context, GRANULE)
        need = self.bytes_for(context, inputs)
        if need > self.size:
            if self.last is not None:
                self.last.wait()  # the old buffer's last call is done with it
            self._allocate(context, -(-need // GRANULE) * GRANULE)
        return self.buffer

    def drop(self) -> None:
        """Let go of the buffer after a call IREE refused: a refusal before the call was
        queued never signals its fence (a later call waiting on it would wait forever),
        one after would still use the buffer; IREE keeps a queued call's buffers alive
        itself, and the next call allocates a new one."""
        self.buffer, self.last, self._semaphore = None, None, None

    def _allocate(self, context: Any, size: int) -> None:
        import iree.runtime as rt

        self.buffer = context.config.device.allocator.allocate_buffer(
            memory_type=rt.MemoryType.DEVICE_LOCAL,
            allowed_usage=rt.BufferUsage.DEFAULT | rt.BufferUsage.DISPATCH_STORAGE,
            allocation_size=size)


__all__ = ["IREE_ERRORS", "SIZE_QUERY", "Arena", "add_size_checks", "compile_checked",
           "is_size_query"]
