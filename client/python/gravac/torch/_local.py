"""A world of one without a launcher: what ``python train.py`` gets from ``hvd.init()``.

Horovod runs a script started without horovodrun as a job of size 1, which is how people debug;
gravac does the same when the GRAVAC_* environment of gravacrun is absent. LocalContext has the
interface of gravac._gravac.Context (raw pointers of contiguous CPU buffers, dtype codes,
requests with wait/poll/info), so every call of gravac.torch works unchanged on top of it, with
no daemon:

* allreduce of one rank is its input (Sum and Average alike), allgather and broadcast return
  the input; barrier returns at once; join returns 0 (the only rank is the last to join); start_timeline raises (gravacd writes
  the timeline).
* A tensor marked for compression (a GraVAC compressor on an fp32 gradient) goes through the
  daemon's top-k step with error feedback, on this process: p = g + e, keep the
  KeepCount(n, θ) largest |p| (ties: lower index), e = p - kept. θ is the compressor's theta_min
  (the θ a GraVAC job starts from; a static topk compressor's θ), so the training math is the
  one a gravacrun job of size 1 would do. Only the "topk" compressor is reproduced here; the
  others raise a GravacError naming the tensor.

Thread-safety: as the Context it stands in for (one lock around the residuals).
"""

import ctypes
import threading

import torch

from gravac import _gravac
from gravac._gravac import GravacError

_TORCH_DTYPES = {
    _gravac.FLOAT32: torch.float32,
    _gravac.FLOAT64: torch.float64,
    _gravac.FLOAT16: torch.float16,
    _gravac.BFLOAT16: torch.bfloat16,
    _gravac.INT32: torch.int32,
    _gravac.INT64: torch.int64,
    _gravac.UINT8: torch.uint8,
}


def _view(address, shape, dtype):
    """A tensor over the memory at `address` (no copy; the caller keeps that memory alive)."""
    count = 1
    for d in shape:
        count *= int(d)
    if count == 0:
        return torch.empty(tuple(shape), dtype=dtype)
    nbytes = count * torch.empty((), dtype=dtype).element_size()
    raw = (ctypes.c_uint8 * nbytes).from_address(address)
    return torch.frombuffer(raw, dtype=dtype, count=count).view(tuple(shape))


def keep_count(n, theta):
    """kernels::KeepCount: how many elements top-k keeps of n at compression factor θ."""
    if n <= 0:
        return 0
    if not theta > 1.0:
        return n
    return min(n, max(1, int(float(n) / theta)))


class _Done:
    """A request that completed when it was posted."""

    def __init__(self, theta=1.0, collective="local", gathered=None):
        self._info = (float(theta), collective, 0)
        self._gathered = gathered

    def wait(self):
        return None

    def poll(self):
        return True

    def info(self):
        return self._info

    def error(self):
        return ""

    def allgather_size(self):
        g = self._gathered
        return (g.shape[0], g.numel() * g.element_size())

    def allgather_copy(self, out, out_bytes):
        g = self._gathered
        nbytes = g.numel() * g.element_size()
        if out_bytes < nbytes:
            raise GravacError("allgather result does not fit the output buffer")
        ctypes.memmove(out, g.data_ptr(), nbytes)


class LocalContext:
    """gravac._gravac.Context for a world of one (see the module doc)."""

    rank = 0
    size = 1
    local_rank = 0
    local_size = 1
    nccl_built = False  # no gravacd: nothing crosses nodes

    def __init__(self):
        self._lock = threading.Lock()
        self._closed = False
        self._residuals = {}  # tensor name -> error-feedback residual (fp32)
        self.theta = 1.0  # θ for tensors marked for compression (set from the compressor)
        self.compressor = "topk"

    @property
    def closed(self):
        return self._closed

    def _check(self):
        if self._closed:
            raise GravacError("gravac context is shut down")

    def use_compressor(self, compression):
        """Takes θ and the compressor kind from a GraVAC compressor (gravac.torch.Compression)."""
        self.theta = float(getattr(compression, "theta_min", 1.0))
        self.compressor = getattr(compression, "compressor", "topk")

    def allreduce_async(self, name, inp, out, shape, dtype, op, step, samples, compress,
                        process_set=()):
        self._check()
        if op not in (_gravac.SUM, _gravac.AVERAGE):
            raise GravacError("tensor '%s': unknown op %d" % (name, op))
        torch_dtype = _TORCH_DTYPES.get(dtype)
        if torch_dtype is None:
            raise GravacError("unknown dtype code %d" % dtype)
        src = _view(inp, shape, torch_dtype)
        dst = _view(out, shape, torch_dtype)
        if not compress or torch_dtype != torch.float32 or not self.theta > 1.0:
            if inp != out:
                dst.copy_(src)
            return _Done()
        if self.compressor != "topk":
            raise GravacError("tensor '%s': compressor '%s' runs only in a gravacrun job; without "
                              "a launcher gravac reproduces 'topk' only" % (name, self.compressor))
        with self._lock:
            flat = src.reshape(-1)
            residual = self._residuals.get(name)
            if residual is None or residual.numel() != flat.numel():
                residual = torch.zeros_like(flat)
            p = flat + residual
            k = keep_count(p.numel(), self.theta)
            # Largest |p| first, ties to the lower index: a stable sort of -|p|.
            order = torch.sort(-p.abs(), stable=True).indices[:k]
            kept = torch.zeros_like(p)
            kept[order] = p[order]
            self._residuals[name] = p - kept
            dst.reshape(-1).copy_(kept)
        return _Done(theta=self.theta, collective="local")

    def allgather_async(self, name, inp, shape, dtype, process_set=()):
        self._check()
        gathered = _view(inp, shape, _TORCH_DTYPES[dtype]).clone()
        return _Done(gathered=gathered)

    def broadcast_async(self, name, data, shape, dtype, root_rank, process_set=()):
        self._check()
        if int(root_rank) != 0:
            raise GravacError("tensor '%s': root rank %d is outside world size 1"
                              % (name, root_rank))
        return _Done()

    def alloc_buffer(self, nbytes):
        self._check()
        return bytearray(max(int(nbytes), 1))

    def barrier(self):
        self._check()

    def join(self):
        self._check()
        return 0

    def timeline(self, path):
        self._check()
        if path:
            raise GravacError("start_timeline: the timeline is written by gravacd, and a world "
                              "of one without gravacrun has none (run it under gravacrun -np 1)")

    def shutdown(self):
        self._closed = True
