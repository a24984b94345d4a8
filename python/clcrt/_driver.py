"""The few CUDA driver calls the package makes itself, through libcuda.so.1.

clcrt's C API takes CUstreams from its caller; in C the caller makes them. Python callers
have no driver bindings, so this module makes what the API's Pythonic counterparts need:
a stream with a priority, the capture state of a stream, completion events, the device an
address belongs to (the CUDA Array Interface does not say), and CUDA IPC handles of device
memory for clcrt.tp's peers. Nothing here schedules work.
"""

import contextlib
import ctypes
import threading

from ._errors import CudaError, InvalidError, NoDeviceError

CU_STREAM_NON_BLOCKING = 1
CU_STREAM_CAPTURE_MODE_RELAXED = 2
CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
CU_EVENT_BLOCKING_SYNC, CU_EVENT_DISABLE_TIMING = 1, 2
CUDA_ERROR_INVALID_VALUE = 1

_cu = None
_lock = threading.Lock()


class _IpcHandle(ctypes.Structure):  # CUipcMemHandle: 64 opaque bytes, passed by value
    _fields_ = [("reserved", ctypes.c_char * 64)]


def _load():
    global _cu
    if _cu is not None:
        return _cu
    with _lock:
        if _cu is None:
            try:
                cu = ctypes.CDLL("libcuda.so.1")
            except OSError as e:
                raise NoDeviceError("the CUDA driver (libcuda.so.1) could not be loaded: %s" % e) from None
            vp, P, i = ctypes.c_void_p, ctypes.POINTER, ctypes.c_int
            sig = {
                "cuInit": [ctypes.c_uint],
                "cuGetErrorName": [i, P(ctypes.c_char_p)],
                "cuDeviceGet": [P(i), i],
                "cuDevicePrimaryCtxRetain": [P(vp), i],
                "cuDevicePrimaryCtxRelease_v2": [i],
                "cuCtxPushCurrent_v2": [vp],
                "cuCtxPopCurrent_v2": [P(vp)],
                "cuCtxGetStreamPriorityRange": [P(i), P(i)],
                "cuStreamCreateWithPriority": [P(vp), ctypes.c_uint, i],
                "cuStreamDestroy_v2": [vp],
                "cuStreamIsCapturing": [vp, P(i)],
                "cuThreadExchangeStreamCaptureMode": [P(i)],
                "cuEventCreate": [P(vp), ctypes.c_uint],
                "cuEventRecord": [vp, vp],
                "cuEventSynchronize": [vp],
                "cuEventDestroy_v2": [vp],
                "cuPointerGetAttribute": [vp, i, ctypes.c_uint64],
                "cuMemGetAddressRange_v2": [P(ctypes.c_uint64), P(ctypes.c_size_t), ctypes.c_uint64],
                "cuIpcGetMemHandle": [ctypes.c_char_p, ctypes.c_uint64],
                "cuIpcOpenMemHandle_v2": [P(ctypes.c_uint64), _IpcHandle, ctypes.c_uint],  # the handle by value
                "cuIpcCloseMemHandle": [ctypes.c_uint64],
            }
            for name, args in sig.items():
                f = getattr(cu, name)
                f.restype, f.argtypes = i, args
            _cu = cu
    return _cu


def _check(r, what):
    if r:
        name = ctypes.c_char_p()
        _cu.cuGetErrorName(r, ctypes.byref(name))
        raise CudaError("%s failed with %s" % (what, (name.value or b"error %d" % r).decode()))


@contextlib.contextmanager
def device_context(device):
    """The device's primary context, current on this thread for the block."""
    cu = _load()
    _check(cu.cuInit(0), "cuInit")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    _check(cu.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet(%d)" % device)
    _check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    try:
        _check(cu.cuCtxPushCurrent_v2(ctx), "cuCtxPushCurrent")
        try:
            yield
        finally:
            cu.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
    finally:
        cu.cuDevicePrimaryCtxRelease_v2(dev)


def priority_range(device):
    """(least, greatest) stream priority of the device, CUDA's numbering (e.g. 0, -5)."""
    least, greatest = ctypes.c_int(), ctypes.c_int()
    with device_context(device):
        _check(_cu.cuCtxGetStreamPriorityRange(ctypes.byref(least), ctypes.byref(greatest)),
               "cuCtxGetStreamPriorityRange")
    return least.value, greatest.value


def stream_create(device, priority):
    """A non-blocking CUstream of that priority (CUDA's numbering); the caller destroys it."""
    s = ctypes.c_void_p()
    with device_context(device):
        _check(_cu.cuStreamCreateWithPriority(ctypes.byref(s), CU_STREAM_NON_BLOCKING, priority),
               "cuStreamCreateWithPriority(priority %d)" % priority)
    return s.value


def stream_destroy(device, handle):
    with device_context(device):
        _cu.cuStreamDestroy_v2(handle)


def is_capturing(handle):
    """Whether the stream is being captured into a graph now."""
    cu = _load()
    status = ctypes.c_int()
    if cu.cuStreamIsCapturing(handle, ctypes.byref(status)):
        return False
    return status.value != 0


@contextlib.contextmanager
def relaxed_capture():
    """This thread's capture mode relaxed for the block: a stream wrapper made while a graph
    is being captured (torch.cuda.graph captures in global mode) allocates device memory,
    which global mode forbids and which invalidates the capture."""
    cu = _load()
    mode = ctypes.c_int(CU_STREAM_CAPTURE_MODE_RELAXED)
    _check(cu.cuThreadExchangeStreamCaptureMode(ctypes.byref(mode)), "cuThreadExchangeStreamCaptureMode")
    try:
        yield
    finally:
        cu.cuThreadExchangeStreamCaptureMode(ctypes.byref(mode))


def event_record(device, handle):
    """An event recorded on the stream now; wait with event_wait (which destroys it)."""
    ev = ctypes.c_void_p()
    with device_context(device):
        _check(_cu.cuEventCreate(ctypes.byref(ev), CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        r = _cu.cuEventRecord(ev, handle)
        if r:
            _cu.cuEventDestroy_v2(ev)
            _check(r, "cuEventRecord")
    return ev.value


def event_wait(device, ev):
    with device_context(device):
        try:
            _check(_cu.cuEventSynchronize(ev), "cuEventSynchronize (the stream's work failed)")
        finally:
            _cu.cuEventDestroy_v2(ev)


def pointer_device(ptr):
    """The device ordinal the address belongs to, or None without a driver."""
    try:
        cu = _load()
    except NoDeviceError:
        return None
    if cu.cuInit(0):
        return None
    ordinal = ctypes.c_int(-1)
    r = cu.cuPointerGetAttribute(ctypes.byref(ordinal), CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr)
    if r == CUDA_ERROR_INVALID_VALUE or r == 101:  # not a CUDA address (or the CPU's)
        raise InvalidError("address 0x%x is not GPU memory the driver knows" % ptr)
    return ordinal.value if r == 0 else None


CU_IPC_HANDLE_SIZE = 64
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1


def ipc_handle(device, ptr):
    """(handle, offset): the CUDA IPC handle (64 bytes) of the allocation that holds device
    address ptr, and ptr's offset in it (an allocator's block may lie inside a larger one)."""
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    h = ctypes.create_string_buffer(CU_IPC_HANDLE_SIZE)
    with device_context(device):
        _check(_cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr), "cuMemGetAddressRange")
        _check(_cu.cuIpcGetMemHandle(h, base.value), "cuIpcGetMemHandle")
    return h.raw, ptr - base.value


def ipc_open(device, handle):
    """The base address, in this process and on `device`, of another process's allocation
    (its ipc_handle), with peer access enabled as needed; ipc_close unmaps it."""
    if len(handle) != CU_IPC_HANDLE_SIZE:
        raise InvalidError("ipc_open: a handle is %d bytes, not %d" % (CU_IPC_HANDLE_SIZE, len(handle)))
    p, h = ctypes.c_uint64(), _IpcHandle()
    ctypes.memmove(ctypes.byref(h), handle, CU_IPC_HANDLE_SIZE)
    with device_context(device):
        _check(_cu.cuIpcOpenMemHandle_v2(ctypes.byref(p), h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
               "cuIpcOpenMemHandle")
    return p.value


def ipc_close(device, base):
    with device_context(device):
        _check(_cu.cuIpcCloseMemHandle(base), "cuIpcCloseMemHandle")
