"""Loading and calling compiled rlx modules (IREE runtime), with weights as parameters.

``rlx.runtime.load(vmfb, device=..., params=...)`` returns a :class:`Program` whose
functions take numpy arrays (by position or by input name) and return numpy arrays.
Weights are given as a dict of numpy arrays or a weight file (:mod:`rlx.weights`); they
are checked against the weights the module declares before anything runs. Each function
``f`` of an rlx vmfb has two exports (``rlx.lowering.exports``): ``f`` (IREE's synchronous
ABI) and ``f$async`` (coarse fences), which every call here goes through.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from rlx.ir.diagnostics import RunError, size_check_message
from rlx.ir.dtypes import NARROW, DType, to_host_array, to_module_array, unsigned_type
from rlx.transients import IREE_ERRORS, SIZE_QUERY, Arena, is_size_query
from rlx.weights import (
    ENCODED_SCOPE,
    PARAM_SCOPE,
    WEIGHT_FORMATS,
    ParamSource,
    ParamSpec,
    encoded_index,
    parameter_index,
    read_safetensors_header,
    release_file_pages,
    save_params,
)

DEVICES = ("local-task", "local-sync", "vulkan", "cuda", "hip")
ASYNC_SUFFIX = "$async"
"""``f$async`` is the coarse-fences export of ``f`` (``rlx.lowering.exports``)."""
COARSE_FENCES = "coarse-fences"
WAIT_POLL_S = (5e-5, 5e-4)
"""Waiting for a result polls the call's semaphore, sleeping from the first interval,
doubling, to the second, instead of blocking in IREE's wait at once: that wait spins on the
CPU for up to ~2 ms (1.6 ms of a 6 ms wait, measured), and on a 2-core machine running
IREE's two workers the spinning took ~0.9 ms of a 135M model's ~7 ms pipelined decode step
from the workers (perf, 64-token runs)."""
WAIT_PLAIN_POLL_S = 0.01
"""A wait with no later call queued behind it (whose latency is the caller's) polls this
long, then blocks in IREE's wait: a long call costs one spin, not a wake-up every 0.5 ms.
A wait with a later call queued (the pipelined decode loop) keeps polling, its sleeps
growing to an eighth of the time waited: the device is busy with the queued call."""

def _np_dtype(dtype: DType) -> np.dtype:
    return dtype.numpy


# --------------------------------------------------------------------------------------
# Programs and functions
# --------------------------------------------------------------------------------------


class DeviceTensor:
    """A result kept in device memory (``Function.on_device`` / ``Function.submit``): pass
    it back as an input without a host round trip (a KV cache, a carried state), or read it
    with ``numpy()``. A result of ``submit`` may still be computing: ``numpy()`` and
    ``wait()`` block until it is ready, and a call that takes it as an input waits for it
    on the device."""

    def __init__(self, program: Program, array: Any = None, ready: Any = None, *,
                 buffer_view: Any = None, semaphore: Any = None) -> None:
        self._program = program
        self.host_type: np.dtype | None = None
        """The numpy type the caller sees where it is not the module's own: numpy's
        unsigned type (a result declared ``rlx.unsigned``: the same bits) or ml_dtypes'
        narrow type (``rlx.narrow``: the same values)."""
        self._array = array  # an iree.runtime DeviceArray, or built from the buffer view
        self._bv = buffer_view if array is None else array._buffer_view
        self._ready = ready  # the HalFence of the call computing it (None: ready)
        self._semaphore = semaphore  # the fence's semaphore (signalled to 1), to poll
        self._call = program._calls  # calls queued on the program so far, this one included

    @property
    def array(self) -> Any:
        """The iree.runtime ``DeviceArray`` (made on first use: a decode step's ~60 results
        are passed on as buffer views, and making 60 DeviceArrays cost 0.65 ms a step)."""
        if self._array is None:
            import iree.runtime as rt

            self._array = rt.DeviceArray(self._program._device, self._bv,
                                         implicit_host_transfer=True)
        return self._array

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._bv.shape)

    @property
    def dtype(self) -> np.dtype:
        import iree.runtime as rt

        return self.host_type or np.dtype(rt.HalElementType.map_to_dtype(
            self._bv.element_type))

    def wait(self) -> DeviceTensor:
        """Block until the call that computes this tensor has finished (a device error
        surfaces here as a RunError)."""
        if self._ready is not None:
            try:
                if self._semaphore is not None:
                    _poll(self._semaphore, queued=self._program._calls > self._call)
                self._ready.wait()  # returns at once, or raises the call's error
            except (RuntimeError, ValueError) as e:
                raise RunError(f"error: the call computing {self!r} failed: {e}") from None
            self._ready = None
        return self

    def numpy(self) -> np.ndarray:
        host = self._program.to_host(self.wait().array)
        return host if self.host_type is None else to_host_array(host, self.host_type)

    def __repr__(self) -> str:
        return f"DeviceTensor({self.dtype}{list(self.shape)} on {self._program.device_name})"


def _poll(semaphore: Any, queued: bool) -> None:
    """Sleep until ``semaphore`` reaches 1, or (``queued`` false) ``WAIT_PLAIN_POLL_S``
    has passed; a failed call raises. See ``WAIT_POLL_S``."""
    delay, longest = WAIT_POLL_S
    start = time.perf_counter()
    while semaphore.query() < 1:
        waited = time.perf_counter() - start
        if not queued and waited > WAIT_PLAIN_POLL_S:
            return
        time.sleep(delay)
        delay = min(2 * delay, max(longest, waited / 8) if queued else longest)


def _settle(out: DeviceTensor | tuple[DeviceTensor, ...]
            ) -> DeviceTensor | tuple[DeviceTensor, ...]:
    """Wait for one call's results (they share its signal fence) and mark them ready."""
    tensors = out if isinstance(out, tuple) else (out,)
    if tensors:
        tensors[0].wait()
    for t in tensors:
        t._ready = None
    return out


class Function:
    """One entry point: call with numpy arrays (positional or by input name)."""

    def __init__(self, program: Program, name: str, invoker: Any, vm_function: Any,
                 async_function: Any = None) -> None:
        self._program = program
        self.name = name
        self._invoke = invoker
        reflection = vm_function.reflection
        self.input_names: list[str] = json.loads(reflection.get("rlx.inputs", "[]"))
        self.input_types: list[tuple[list[int | None], DType]] = [
            (shape, DType.parse(dtype))
            for shape, dtype in json.loads(reflection.get("rlx.input_types", "[]"))]
        self.signature = reflection.get("iree.abi.declaration", "")
        # rlx exports each function twice (rlx.lowering.exports): ``f`` with IREE's
        # synchronous ABI and ``f$async`` with its coarse-fences ABI (inputs, wait fence,
        # signal fence), which every call here goes through; a vmfb with only the sync
        # export (built by hand) is called through IREE's invoker, one with only the
        # coarse-fences one (an older rlx) through that
        if async_function is None and reflection.get("iree.abi.model") == COARSE_FENCES:
            async_function = vm_function
        self._vm_function = async_function
        self._fences = async_function is not None
        self._arena = (Arena(program._vm, async_function.reflection) if self._fences and (
            SIZE_QUERY in async_function.reflection) else None)
        self._dtypes = [dtype for _, dtype in self.input_types]
        # integers the module reads as unsigned (an ONNX uint tensor): the caller passes and
        # gets numpy's unsigned types; the module holds the same bits as signless integers
        # and narrow types (int4, ...: ``rlx.narrow``): ml_dtypes' arrays, held as values
        unsigned_in = set(json.loads(reflection.get("rlx.unsigned_inputs", "[]")))
        narrow_in = json.loads(reflection.get("rlx.narrow_inputs", "{}"))
        self._unsigned_out = set(json.loads(reflection.get("rlx.unsigned_outputs", "[]")))
        self._narrow_out = {int(i): NARROW[n].numpy for i, n in json.loads(
            reflection.get("rlx.narrow_outputs", "{}")).items()}
        self._want = [NARROW[narrow_in[str(i)]].numpy if str(i) in narrow_in else
                      unsigned_type(dtype) if i in unsigned_in else
                      _np_dtype(dtype) for i, dtype in enumerate(self._dtypes)]

    def __call__(self, *args: Any, **kwargs: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        out = self.on_device(*args, **kwargs)
        if isinstance(out, tuple):
            return tuple(o.numpy() for o in out)
        return out.numpy()

    def on_device(self, *args: Any, **kwargs: Any) -> DeviceTensor | tuple[DeviceTensor, ...]:
        """Like calling the function, but the results stay in device memory."""
        arrays = self._bind(args, kwargs)
        if self._fences:
            return _settle(self._queue(arrays))
        dtypes = self._dtypes
        inputs = [a.wait().array if isinstance(a, DeviceTensor) else
                  to_module_array(a, dtypes[i] if i < len(dtypes) else None)
                  for i, a in enumerate(arrays)]
        try:
            out = self._invoke(*inputs)
        except IREE_ERRORS as e:
            self._fail(arrays, e)
        if isinstance(out, tuple | list):
            return self._results(tuple(DeviceTensor(self._program, o) for o in out))
        return self._results((DeviceTensor(self._program, out),))[0]

    def _results(self, out: tuple[DeviceTensor, ...]) -> tuple[DeviceTensor, ...]:
        for i in self._unsigned_out:
            if i < len(out):
                out[i].host_type = unsigned_type(out[i].dtype)
        for i, host in self._narrow_out.items():
            if i < len(out):
                out[i].host_type = host
        return out

    def submit(self, *args: Any, **kwargs: Any) -> DeviceTensor | tuple[DeviceTensor, ...]:
        """Queue a call and return at once: the results are device tensors that become
        ready when the call finishes (``numpy()`` / ``wait()`` block until then). Inputs
        may be results of earlier ``submit`` calls still running: the device waits for
        them, the host does not, so the host prepares the next call while the device runs
        this one (JAX's asynchronous dispatch)."""
        if not self._fences:
            raise RunError(f"error: {self.name}: the module has no coarse-fences export "
                           f"'{self.name}{ASYNC_SUFFIX}' (not compiled by rlx?): call it, "
                           "or on_device, instead")
        return self._queue(self._bind(args, kwargs))

    def _queue(self, arrays: list[np.ndarray | DeviceTensor]
               ) -> DeviceTensor | tuple[DeviceTensor, ...]:
        """Invoke the coarse-fences export: wait on the pending inputs' fences, signal a
        fresh one that every result carries."""
        import iree.runtime as rt

        program, dtypes = self._program, self._dtypes
        device = program._device
        pending = []
        inputs = rt.VmVariantList(len(arrays) + 3)
        views = []
        for i, a in enumerate(arrays):
            if isinstance(a, DeviceTensor):
                if a._ready is not None and a._program is program:
                    pending.append(a._ready)
                else:
                    a.wait()  # another program's call: wait for it here
                views.append(a._bv)
            else:
                host = to_module_array(a, dtypes[i] if i < len(dtypes) else None)
                views.append(rt.asdevicearray(device, host)._buffer_view)
        for bv in views:
            inputs.push_ref(bv)
        arena = self._arena
        if arena is not None:  # caller-owned transients (rlx.transients): one call at a time
            try:  # the size query reads the inputs' dims: a wrong rank fails here
                inputs.push_ref(arena.storage(program._ctx, views))
            except IREE_ERRORS as e:
                self._fail(arrays, e)
            if arena.last is not None:
                pending.append(arena.last)
        program._calls += 1
        semaphore = device.create_semaphore(0)
        signal = rt.HalFence.create_at(semaphore, 1)
        inputs.push_ref(rt.HalFence.join(pending) if pending else rt.HalFence(1))
        inputs.push_ref(signal)
        results = rt.VmVariantList(8)
        try:
            program._ctx.vm_context.invoke(self._vm_function, inputs, results)
        except IREE_ERRORS as e:
            if arena is not None:
                arena.drop()  # its signal may never come: the next call takes a new buffer
            self._fail(arrays, e)
        if arena is not None:
            arena.queued(signal, semaphore)
        out = self._results(tuple(
            DeviceTensor(program, None, signal, semaphore=semaphore,
                         buffer_view=results.get_as_ref(i).deref(rt.HalBufferView))
            for i in range(results.size)))
        return out if len(out) != 1 else out[0]

    def _fail(self, arrays: list[np.ndarray | DeviceTensor], e: Exception) -> NoReturn:
        """Raise the RunError for a call IREE refused: a failed run-time size check (the
        module's own message: op, label, the two sizes), an input of the wrong shape, or
        IREE's status."""
        text = str(e)
        checked = size_check_message(text)
        if checked is not None:
            raise RunError(f"{checked} (in a call of '{self.name}')") from None
        self._check(arrays, device=True)  # a device tensor of the wrong shape: name it
        # IREE may turn a size the module's ops need into a static dim of the entry point
        # (a dynamic input read as the 3 rows of an expand): it then refuses the input
        m = _INPUT_DIM.search(text)
        if m is not None:
            i, axis = int(m["input"]), m["axis"]
            name = self.input_names[i] if i < len(self.input_names) else f"#{i}"
            raise RunError(f"error: {self.name}: input '{name}' dim {axis}: expected "
                           f"{m['want']} (the module's ops need this size), found "
                           f"{m['have']}") from None
        first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
        raise RunError(f"error: calling {self.name}: {first}") from None

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]
              ) -> list[np.ndarray | DeviceTensor]:
        """The inputs in order, host arrays checked against the declared types."""
        names = self.input_names
        if kwargs:
            unknown = set(kwargs) - set(names)
            if unknown:
                raise RunError(f"error: {self.name}: unknown input(s) "
                               f"{', '.join(sorted(unknown))} (inputs: {', '.join(names)})")
            values = list(args)
            for n in names[len(args):]:
                if n not in kwargs:
                    raise RunError(f"error: {self.name}: input '{n}' is missing")
                values.append(kwargs[n])
        else:
            values = list(args)
        if names and len(values) != len(names):
            raise RunError(f"error: {self.name}: expected {len(names)} inputs "
                           f"({', '.join(names)}), found {len(values)}")
        # np.asarray keeps 0-d arrays 0-d (np.ascontiguousarray makes them 1-d)
        arrays = [v if isinstance(v, DeviceTensor) else np.asarray(v, order="C")
                  for v in values]
        self._check(arrays, device=False)
        return arrays

    def _check(self, arrays: list[np.ndarray | DeviceTensor], device: bool) -> None:
        """Raise a RunError naming the first input whose shape or dtype is not the declared
        one. Device tensors only with ``device``: IREE's entry point checks their shapes
        and element types itself, and checking ~60 KV-cache tensors here every decode step
        cost 0.2-0.3 ms of a 9 ms 135M step; on IREE's error they are checked to name the
        input."""
        names = self.input_names
        for i, (arr, (shape, dtype), want) in enumerate(zip(arrays, self.input_types,
                                                            self._want, strict=False)):
            if not device and isinstance(arr, DeviceTensor):
                continue
            got = arr.shape
            fits = len(got) == len(shape) and all(
                d is None or d == a for d, a in zip(shape, got, strict=False))
            if not fits or (arr.dtype != want and not (
                    dtype == DType.BF16 and arr.dtype.name == "bfloat16")):
                dims = ", ".join("?" if d is None else str(d) for d in shape)
                name = names[i] if i < len(names) else f"#{i}"
                raise RunError(f"error: {self.name}: input '{name}': expected {want} "
                               f"[{dims}], found {arr.dtype} {list(arr.shape)}")


_INPUT_DIM = re.compile(r"input(?P<input>\d+) shape dimension (?P<axis>\d+) mismatch; "
                        r"expected (?P<want>\d+) but have (?P<have>\d+)")
"""IREE's refusal of an input whose dim differs from one its entry point made static."""


class Program:
    """A loaded vmfb: ``program.main(x)`` or ``program["main"](x)``."""

    def __init__(self, vmfb: bytes | str | Path, device: str = "local-task",
                 params: ParamSource = None, encoded: str | Path | None = None) -> None:

        if device not in DEVICES:
            raise RunError(f"error: unknown device {device!r} (expected one of "
                           f"{', '.join(DEVICES)})")
        self.device_name = device
        data = Path(vmfb).read_bytes() if isinstance(vmfb, str | Path) else bytes(vmfb)
        self._calls = 0  # calls queued (``Function._queue``), to tell how to wait
        self._encoded = encoded
        try:
            self._load(data, params)
        except _DeviceLost:
            # IREE caches one device per URI; a Vulkan device that reported
            # VK_ERROR_DEVICE_LOST (lavapipe has, intermittently, after many loads) fails
            # every later call, so one lost device would fail every later load in the
            # process. A module cannot load on it: forget it and load once on a new one.
            _forget_device(device)
            try:
                self._load(data, params)
            except _DeviceLost as e:
                raise RunError(_context_error(str(e), device)) from None
        self._device = self._config.device
        bound = getattr(self._ctx.modules, self._vm.name)
        self._functions: dict[str, Function] = {}
        names = set(self._vm.function_names)
        for name in self._vm.function_names:
            if name.startswith("__") or is_size_query(name, names) or (
                    name.endswith(ASYNC_SUFFIX) and name.removesuffix(ASYNC_SUFFIX) in names):
                continue
            twin = name + ASYNC_SUFFIX
            self._functions[name] = Function(
                self, name, getattr(bound, name), self._vm.lookup_function(name),
                self._vm.lookup_function(twin) if twin in names else None)

    def _load(self, data: bytes, params: ParamSource) -> None:
        """The device's config, the module and its parameters in a new context; a lost
        device is :class:`_DeviceLost`, any other refusal a RunError."""
        import iree.runtime as rt

        device = self.device_name
        self._config = _config(device)
        try:
            self._vm = rt.VmModule.copy_buffer(self._config.vm_instance, data)
        except (RuntimeError, ValueError) as e:
            raise RunError(f"error: cannot load the module on {device}: {e}") from None
        self._keep: list[Any] = []
        modules = [self._vm]
        specs = self.param_specs()
        if specs or params is not None:
            index = parameter_index(params, specs, self._keep)
            providers = [index.create_provider(scope=PARAM_SCOPE)]
            if self._encoded is not None:
                # the weights' planes, encoded ahead of time (rlx.encoding): the archive
                # is mapped and used in place, as a GGUF's tensors are
                encoded = encoded_index(self._encoded)
                self._keep.append(encoded)
                providers.append(encoded.create_provider(scope=ENCODED_SCOPE))
            modules.insert(0, rt.create_io_parameters_module(self._config.vm_instance,
                                                             *providers))
        try:
            self._ctx = rt.SystemContext(vm_modules=modules, config=self._config)
        except (RuntimeError, ValueError) as e:
            if _is_device_loss(str(e)):
                raise _DeviceLost(str(e)) from None
            raise RunError(_context_error(str(e), device)) from None
        # The module's initializers ran with the context: weights that views of a file
        # mapping hold (a GGUF's tensors) were read into the planes that the functions use
        # and need not stay resident (a page read again comes back from the file).
        release_file_pages(self._keep)

    def param_specs(self) -> list[ParamSpec]:
        return _param_specs(self._vm)

    def upload(self, array: np.ndarray) -> DeviceTensor:
        """Copy an array to the device once (then pass it to any function without a copy)."""
        import iree.runtime as rt

        return DeviceTensor(self, rt.asdevicearray(self._device, np.ascontiguousarray(array)))

    @property
    def functions(self) -> dict[str, Function]:
        return dict(self._functions)

    def __getitem__(self, name: str) -> Function:
        if name not in self._functions:
            raise RunError(f"error: no function '{name}' (functions: "
                           f"{', '.join(self._functions)})")
        return self._functions[name]

    def __getattr__(self, name: str) -> Function:
        if name.startswith("_"):
            raise AttributeError(name)
        return self[name]

    def to_host(self, arr: Any) -> np.ndarray:
        """Copy a result to a numpy array (through a staging buffer, which also works on
        Vulkan, where the plain ``to_host`` needs 4 KiB-aligned host memory)."""
        import iree.runtime as rt

        if isinstance(arr, np.ndarray):
            return arr
        if self.device_name.startswith("local"):
            # to_host() on a local device is a view of the device buffer, which IREE's
            # allocator hands to a later call: copy, or a kept result changes under the user.
            return np.array(arr.to_host(), copy=True)
        bv = arr._buffer_view
        src = bv.get_buffer()
        dev = self._device
        host = dev.allocator.allocate_buffer(
            memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
            allowed_usage=int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED),
            allocation_size=src.byte_length())
        sem = dev.create_semaphore(0)
        dev.queue_copy(src, host, wait_semaphores=rt.HalFence.create_at(sem, 0),
                       signal_semaphores=rt.HalFence.create_at(sem, 1))
        rt.HalFence.create_at(sem, 1).wait()
        mapped = host.map()
        dtype = rt.HalElementType.map_to_dtype(bv.element_type)
        return np.array(mapped.asarray(tuple(bv.shape), dtype), copy=True)


_DEVICE_TARGETS = {"local-task": "llvm-cpu", "local-sync": "llvm-cpu", "vulkan": "vulkan",
                   "cuda": "cuda", "hip": "rocm"}
"""The ``rlx.compile`` target whose vmfb each runtime device runs."""
_IREE_DEVICES = {"local": ("llvm-cpu", "local-task"), "vulkan": ("vulkan", "vulkan"),
                 "cuda": ("cuda", "cuda"), "hip": ("rocm", "hip")}
"""IREE's device name in a vmfb -> (rlx target, rlx runtime device)."""
_STATUS_PREFIX = re.compile(r"^(?:Error creating (?:driver|vm context with modules): )?"
                            r"(?:<vm>:0: |\S+\.(?:c|cc|cpp|h):\d+: )?")
_DEVICE_TARGET = re.compile(r'#hal\.device\.target<"(?P<device>[^"]+)"')
_EXECUTABLE = re.compile(r'#hal\.executable\.target<"[^"]+", "(?P<format>[^"]+)"')


def _status_line(text: str) -> str:
    """The first line of IREE's status text, without the C source position."""
    first = text.strip().splitlines()[0] if text.strip() else "unknown error"
    return _STATUS_PREFIX.sub("", first).rstrip(": ")


class _DeviceLost(Exception):
    """IREE's cached device reported itself lost (``VK_ERROR_DEVICE_LOST``)."""


def _is_device_loss(text: str) -> bool:
    """Whether a refused context is a lost device. Lavapipe's VK_ERROR_DEVICE_LOST reaches
    us two ways: with its text (``DATA_LOSS; [vkSignalSemaphore] VK_ERROR_DEVICE_LOST``),
    or, when the initializer's fence is the one that failed, as the bare code (the
    semaphore's failure value keeps the status code and drops the message:
    ``DATA_LOSS; while invoking native function hal.fence.await``). Loading once more on
    a new device is right for both; a refusal that is not a loss fails the same way again
    and is reported then. IREE may put its context error's prefix or a source position
    before the code (``Error creating vm context with modules: DATA_LOSS; ...``): the
    status line is what is read."""
    return "DEVICE_LOST" in text or _status_line(text).startswith("DATA_LOSS")


def _forget_device(device: str) -> None:
    """Drop iree.runtime's cached device for ``device`` (``system_setup`` keeps one per
    URI, which :func:`_config` gets), so that the next config creates a new one."""
    from iree.runtime import system_setup

    with system_setup._LOCK:
        system_setup._GLOBAL_DEVICES_BY_URI.pop(device, None)


def _config(device: str) -> Any:
    """IREE's runtime configuration (instance and device) for ``device``; a device IREE
    cannot create is a RunError with IREE's own reason (its ``Config`` only says "Could
    not create device"; creating the driver and device again gives the status)."""
    import iree.runtime as rt

    try:
        return rt.Config(device)
    except (RuntimeError, ValueError) as e:
        reason = _status_line(str(e))
        try:
            driver = rt.get_driver(device)
            if not driver.query_available_devices():
                reason = f"the {device} driver loaded but lists no device"
            else:
                driver.create_default_device()
        except (RuntimeError, ValueError) as why:
            reason = _status_line(str(why))
        raise RunError(f"error: cannot create a {device} device: {reason}") from None


def _context_error(text: str, device: str) -> str:
    """The message for IREE refusing to load a module on ``device``: a vmfb compiled for
    another target names both (IREE prints a ~3 KB target description instead)."""
    m = _DEVICE_TARGET.search(text)
    if "INCOMPATIBLE" not in text or m is None:
        return f"error: cannot load the module on {device}: {_status_line(text)}"
    target, runs_on = _IREE_DEVICES.get(m["device"], (m["device"], m["device"]))
    formats = ", ".join(sorted({x["format"] for x in _EXECUTABLE.finditer(text)}))
    built = f"the module was compiled for {target} ({formats or 'IREE device ' + m['device']})"
    if target == _DEVICE_TARGETS[device]:
        return (f"error: {built}, which this {device} device cannot run (another "
                f"architecture or CPU/GPU features): compile it for this machine")
    runs = _DEVICE_TARGETS[device]
    which = f" (which runs {runs} modules)" if runs != device else ""
    return (f"error: {built}, the device is {device}{which}: load it on {runs_on}, or "
            f"compile it with target={runs}")


def _param_specs(vm: Any) -> list[ParamSpec]:
    """The weights a loaded ``VmModule`` declares (its functions' ``rlx.params``)."""
    specs: dict[str, ParamSpec] = {}
    for name in vm.function_names:
        refl = vm.lookup_function(name).reflection
        for pname, (shape, dtype) in json.loads(refl.get("rlx.params", "{}")).items():
            specs[pname] = ParamSpec(pname, tuple(shape), DType.parse(dtype))
    return list(specs.values())


def read_param_specs(vmfb: bytes | str | Path) -> list[ParamSpec]:
    """The weights a vmfb (bytes or path) declares, read without loading it on a device."""
    import iree.runtime as rt

    data = Path(vmfb).read_bytes() if isinstance(vmfb, str | Path) else bytes(vmfb)
    try:
        vm = rt.VmModule.copy_buffer(rt.VmInstance(), data)
    except (RuntimeError, ValueError) as e:
        raise RunError(f"error: not a loadable vmfb: {e}") from None
    return _param_specs(vm)


def load(vmfb: bytes | str | Path, device: str = "local-task", params: ParamSource = None,
         encoded: str | Path | None = None) -> Program:
    """Load a vmfb (bytes or path) on ``device`` with its weights; ``encoded``: the
    archive of its encoded weights, for a vmfb compiled with ``encode_parameters``
    (:func:`rlx.encoding.compile_model` makes both)."""
    return Program(vmfb, device, params, encoded)


__all__ = ["DEVICES", "PARAM_SCOPE", "WEIGHT_FORMATS", "DeviceTensor", "Function",
           "ParamSource", "ParamSpec", "Program", "load", "parameter_index",
           "read_param_specs", "read_safetensors_header", "save_params"]
