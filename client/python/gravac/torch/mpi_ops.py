"""Collective operations on PyTorch tensors (Horovod's ``horovod.torch.mpi_ops`` API).

Tensors cross to the daemon as raw pointers of contiguous CPU buffers: non-contiguous inputs
are made contiguous and tensors on other devices are staged through host memory (results go back
to the tensor's device). Every collective is asynchronous underneath: ``*_async`` calls return an
integer handle at once (the input has already been copied into the daemon's shared memory), and
``synchronize(handle)`` waits for the result; the blocking calls are ``synchronize(*_async(...))``.
In-place collectives on tensors in shared buffers (``_shared_empty_like``; DistributedOptimizer
keeps its gradients there) are not copied: the daemon reads and writes the tensor itself, so it
must not change until synchronize() returns.

Tensor names identify a collective across ranks; unnamed tensors get ``<op>.noname.<n>`` from a
per-process counter, so every rank must issue unnamed collectives in the same order (as in
Horovod). A name may be in flight once per worker at a time.

Process state: :func:`init` opens one connection (a gravac._gravac.Context) per process; all
functions here use it. Without gravacrun's environment the connection is a world of one with no
daemon (gravac.torch._local). The module is safe to call from several Python threads; a handle is
synchronized once.
"""

import atexit
import itertools
import os
import threading

import torch

from gravac import _gravac
from gravac._gravac import GravacError
from gravac.torch import _local
from gravac.torch import process_sets as _sets
from gravac.torch.process_sets import global_process_set

# Reduction ops (Horovod's constants). The daemon reduces Sum and Average (and compresses them);
# the others run dense in Python over an allgather (gravac.torch.dense_ops).
Average = _gravac.AVERAGE
Sum = _gravac.SUM
Adasum = 2
Min = 3
Max = 4
Product = 5
_OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min", Max: "Max",
             Product: "Product"}

_DTYPES = {
    torch.float32: _gravac.FLOAT32,
    torch.float64: _gravac.FLOAT64,
    torch.float16: _gravac.FLOAT16,
    torch.bfloat16: _gravac.BFLOAT16,
    torch.int32: _gravac.INT32,
    torch.int64: _gravac.INT64,
    torch.uint8: _gravac.UINT8,
}


class _Pending:
    """A request in flight with the buffers it reads/writes and how to produce the result."""

    __slots__ = ("request", "keep", "finish", "name", "set_id")

    def __init__(self, request, keep, finish, name, set_id=0):
        self.request = request
        self.keep = keep  # tensors the daemon writes into: alive until completion
        self.finish = finish  # () -> result tensor, after a successful wait
        self.name = name
        self.set_id = set_id  # the process set it runs on (0: every rank)


class _State:
    """The process's connection and bookkeeping (the one piece of module state, as Horovod)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.context = None
        self.parked = None  # the connection kept by shutdown() for a later init()
        self.cross = (0, 1)  # (cross_rank, cross_size), set by init()
        self.handles = {}
        self.in_flight = set()  # names of this process's requests not yet synchronized
        self.next_handle = itertools.count(1)
        self.noname = {}
        self.atexit_registered = False
        # Training steps are numbered per process, across every DistributedOptimizer, so that
        # each tensor name sees increasing steps (the daemon relies on it).
        self.train_step = 0
        self.optimizers = itertools.count()

    def ctx(self):
        context = self.context
        if context is None or context.closed:
            raise ValueError("gravac has not been initialized; use gravac.torch.init().")
        return context

    def auto_name(self, kind, name, process_set=None):
        """`name`, or the next unnamed one of `kind` on `process_set` (counted per set, so that
        the ranks of a set agree on the names whatever other sets they use)."""
        if name is not None:
            return str(name)
        set_id = getattr(process_set, "process_set_id", 0) or 0
        with self.lock:
            counter = self.noname.setdefault((kind, set_id), itertools.count())
            if set_id:
                return "%s.noname.ps%d.%d" % (kind, set_id, next(counter))
            return "%s.noname.%d" % (kind, next(counter))

    def names_on_set(self, set_id):
        """Names of this process's collectives on process set `set_id` not synchronized yet."""
        with self.lock:
            return [p.name for p in self.handles.values() if p.set_id == set_id]

    def reserve(self, name):
        """Marks `name` in flight; raises ValueError at once if it already is (as Horovod)."""
        with self.lock:
            if name in self.in_flight:
                raise ValueError("tensor '%s' is already in flight: a name may be used by one "
                                 "collective at a time until synchronize()" % name)
            self.in_flight.add(name)

    def release(self, name):
        with self.lock:
            self.in_flight.discard(name)

    def then(self, handle, fn):
        """A handle whose result is fn(result of `handle`); `handle` is consumed."""
        pending = self.pop(handle)
        first = pending.finish
        pending.finish = lambda: fn(first())
        return self.add(pending)

    def add(self, pending):
        with self.lock:
            handle = next(self.next_handle)
            self.handles[handle] = pending
            return handle

    def get(self, handle):
        with self.lock:
            pending = self.handles.get(handle)
        if pending is None:
            raise ValueError("unknown or already synchronized gravac handle %r" % (handle,))
        return pending

    def pop(self, handle):
        with self.lock:
            pending = self.handles.pop(handle, None)
        if pending is None:
            raise ValueError("unknown or already synchronized gravac handle %r" % (handle,))
        return pending


_state = _State()


def _open_context():
    """The daemon's connection under gravacrun; a world of one (gravac.torch._local) when the
    script was started without a launcher (no GRAVAC_DAEMON_SOCKET nor GRAVAC_RANK), as
    Horovod runs ``python train.py``."""
    if "GRAVAC_DAEMON_SOCKET" not in os.environ and "GRAVAC_RANK" not in os.environ:
        return _local.LocalContext()
    return _gravac.Context.from_environment()


def init(comm=None, process_sets=None):
    """Connects this worker to its node's daemon (from the GRAVAC_* environment).

    Idempotent, and callable again after shutdown() (as Horovod's). ``process_sets`` (a list of
    ProcessSet or rank lists, the same on every rank) registers Horovod's process sets, ids 1, 2,
    ... in order ("dynamic" or None: none yet; add_process_set adds more). ``comm`` (an MPI
    communicator) is refused: gravac has no MPI. Raises GravacError when the daemon cannot be
    reached, ValueError for bad or differing process sets.
    """
    if comm is not None:
        raise ValueError("init(comm=...) needs MPI, which gravac does not use; list the ranks "
                         "with init(process_sets=[[...], ...]) instead")
    with _state.lock:
        if _state.context is not None and not _state.context.closed:
            if process_sets not in (None, "dynamic"):
                raise ValueError("gravac is initialized already: add process sets with "
                                 "add_process_set (or shutdown() and init(process_sets=...))")
            return
        parked, _state.parked = _state.parked, None
    if (parked is None and os.environ.get("GRAVAC_ELASTIC") == "1"
            and os.environ.get("GRAVAC_MEMBERSHIP_VERSION") == "-1"):
        # A worker of a node the job grows onto: its place comes from the job's next membership.
        from gravac.torch.elastic import _regroup
        _regroup()
    context = parked if parked is not None and not parked.closed else _open_context()
    with _state.lock:
        _state.context = context
        _state.handles.clear()
        _state.in_flight.clear()
        _state.noname.clear()
        if not _state.atexit_registered:
            atexit.register(_close)
            _state.atexit_registered = True
    # Horovod's cross_rank/cross_size: this rank's index among the ranks with its local rank (one
    # per node, node order), and how many there are. One allgather of the local ranks.
    local_ranks = synchronize(allgather_async(
        torch.tensor([context.local_rank], dtype=torch.int64), "gravac.init.local_ranks")).tolist()
    me = context.rank
    _state.cross = (sum(1 for k in range(me) if local_ranks[k] == local_ranks[me]),
                    sum(1 for lr in local_ranks if lr == local_ranks[me]))
    _sets.init_process_sets(process_sets)


def shutdown():
    """Ends this worker's use of gravac: later calls raise until init() is called again.

    Idempotent. The connection to the daemon is kept for a later init() (the daemon holds one
    slot per local rank for the life of the process) and closed when the process exits; when
    requests are still pending it is closed at once, they fail, and a later init() is refused.
    """
    with _state.lock:
        context, _state.context = _state.context, None
        pending = bool(_state.handles)
        _state.handles.clear()
        _state.in_flight.clear()
        if context is not None and not context.closed and not pending:
            _state.parked = context
            return
    if context is not None and not context.closed:
        context.shutdown()


def _close():
    """At exit: says goodbye to the daemon (the worker is done)."""
    shutdown()
    with _state.lock:
        parked, _state.parked = _state.parked, None
    if parked is not None and not parked.closed:
        parked.shutdown()


def is_initialized():
    return _state.context is not None and not _state.context.closed


def rank():
    return _state.ctx().rank


def size():
    return _state.ctx().size


def local_rank():
    return _state.ctx().local_rank


def local_size():
    return _state.ctx().local_size


def cross_rank():
    """This rank's index among the ranks that have its local rank (its node's index when every
    node runs the same number of ranks)."""
    _state.ctx()
    return _state.cross[0]


def cross_size():
    """How many ranks have this rank's local rank (the number of nodes when all are equal)."""
    _state.ctx()
    return _state.cross[1]


def is_homogeneous():
    """True when every node runs the same number of ranks."""
    return size() == local_size() * cross_size()


def mpi_built():
    """False: gravac does not use MPI (nor Gloo or NCCL from Python); for Horovod scripts."""
    return False


def gloo_built():
    return False


def nccl_built():
    """True when the node's gravacd was built with NCCL device collectives: started with
    --device_collectives nccl (gravacrun --daemon_args), or auto when every node can, it exchanges
    CUDA tensors between nodes over NCCL; with the default (host) it exchanges them in host
    memory. False when it was not built with NCCL, and in a world of one run without gravacrun
    (no gravacd). As gravacd said when this rank connected, so it needs init() (ValueError
    before, as rank() does)."""
    return bool(_state.ctx().nccl_built)


def cuda_built():
    """True when libgravac was built with CUDA: allreduces of CUDA tensors then go to gravacd
    without a Python host copy (a CUDA IPC handle of the tensor and events on the current
    stream; gravacd stages them through host memory itself when it cannot map them). False:
    CUDA tensors are copied to host memory here."""
    return bool(_gravac.cuda_built())


def _device_path(context, tensor):
    """Whether the allreduce of `tensor` goes to gravacd as a CUDA tensor (no host copy here)."""
    return (tensor.device.type == "cuda" and _gravac.cuda_built()
            and hasattr(context, "allreduce_device_async"))


def mpi_enabled():
    return False


def gloo_enabled():
    return False


def mpi_threads_supported():
    return False


def barrier(process_set=global_process_set):
    """Blocks until every rank (of `process_set`) called barrier()."""
    ranks = _sets.wire_ranks(process_set, "barrier")
    if not ranks:
        _state.ctx().barrier()
        return
    synchronize(_allreduce_async(torch.zeros(1, dtype=torch.int32), None,
                                 _state.auto_name("barrier", None, process_set), Sum, 1.0, 1.0,
                                 process_set=process_set))


def join(device=-1):
    """Horovod's join: this rank has run out of data.

    Blocks until every rank has called join(); meanwhile the daemon contributes zeros for this
    rank to the allreduces the other ranks still post (Average keeps dividing by size(), as
    Horovod). Returns the rank that joined last. Only allreduce names this rank posted before
    joining can be answered: another name, or an allgather or broadcast, fails on the posting
    ranks with a GravacError naming the joined ranks and the tensor. ``device`` is accepted for
    Horovod's signature (the daemon needs none).
    """
    del device
    return _state.ctx().join()


def start_timeline(file_path, mark_cycles=False):
    """Horovod's timeline: the daemon of rank 0 writes a Chrome trace of every tensor's phases
    (local reduce, negotiation, compression, transfer, decompression; θ and decision epoch) to
    file_path, a path on rank 0's machine. Only rank 0's call acts, as Horovod records on rank
    0; a path that cannot be opened raises GravacError there. The file is complete (a closed
    JSON array) after stop_timeline()."""
    if mark_cycles:
        raise ValueError("mark_cycles is not supported: gravac's negotiation cycles are not "
                         "traced (each tensor's negotiation is)")
    if rank() == 0:
        _state.ctx().timeline(str(file_path))


def stop_timeline():
    """Ends the trace start_timeline began (rank 0's call acts)."""
    if rank() == 0:
        _state.ctx().timeline("")


def _dtype_code(tensor, name):
    code = _DTYPES.get(tensor.dtype)
    if code is None:
        raise ValueError("tensor '%s': dtype %s is not supported by gravac (supported: %s)"
                         % (name, tensor.dtype, ", ".join(str(d) for d in _DTYPES)))
    return code


# Types the daemon does not know travel as their bytes where nothing is reduced (allgather,
# broadcast); allreduce widens them (dense_ops).
_BYTE_TYPES = (torch.int8, torch.int16, torch.bool)


def _wire_view(buf):
    """`buf` as the daemon sees it: itself, or its bytes (uint8, last dimension widened)."""
    if buf.dtype in _BYTE_TYPES:
        return buf.view(torch.uint8)
    return buf


def _host_buffer(tensor):
    """A contiguous CPU tensor with the data of `tensor`; `tensor` itself (detached) if possible."""
    buf = tensor.detach()
    if buf.device.type != "cpu":
        buf = buf.cpu()
    if not buf.is_contiguous():
        buf = buf.contiguous()
    return buf


def _shared_empty_like(tensor):
    """An uninitialized CPU tensor like `tensor` (shape, dtype) in a shared buffer: memory the
    daemon maps, so that in-place collectives on it skip the staging copies (unless
    GRAVAC_ZERO_COPY=0). The tensor keeps the buffer alive, also after shutdown()."""
    numel = tensor.numel()
    buf = _state.ctx().alloc_buffer(numel * tensor.element_size())
    return torch.frombuffer(buf, dtype=tensor.dtype, count=numel).view(tensor.shape)


def _shares_memory(buf, tensor):
    return (tensor.device.type == "cpu" and tensor.is_contiguous()
            and buf.data_ptr() == tensor.data_ptr())


def _resolve_op(average, op):
    if op is None:
        if average is None or average:
            return Average
        return Sum
    if average is not None:
        raise ValueError("op and average are mutually exclusive")
    if op not in _OP_NAMES:
        raise ValueError("op %r is not one of Average, Sum, Adasum, Min, Max, Product" % (op,))
    return op


def _submit(name, call):
    """Runs call() (which posts the request of `name`) with `name` marked in flight."""
    _state.reserve(name)
    try:
        return call()
    except BaseException:
        _state.release(name)
        raise


def _scaled(tensor, factor):
    """tensor * factor in tensor's dtype; integers are scaled in float64 and truncated toward
    zero (Horovod's integer scaling)."""
    if tensor.dtype.is_floating_point:
        return tensor * factor
    return (tensor.double() * factor).to(tensor.dtype)


def _allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor, step=-1,
                     samples=0, compress=False, process_set=global_process_set):
    """Allreduce of `tensor` into `output` (None: a new tensor; may be `tensor` for in place)."""
    if op not in (Sum, Average) or tensor.dtype not in _DTYPES:
        if compress:
            raise ValueError("tensor '%s': only Sum and Average of float32 tensors can be "
                             "compressed, not %s of %s" % (name, _OP_NAMES.get(op, op),
                                                           tensor.dtype))
        from gravac.torch import dense_ops  # pylint: disable=import-outside-toplevel
        return dense_ops.allreduce_async(tensor, output, name, op, prescale_factor,
                                         postscale_factor, process_set=process_set)
    context = _state.ctx()
    name = _state.auto_name("allreduce", name, process_set)
    ranks = _sets.wire_ranks(process_set, name)
    if compress and ranks:
        raise ValueError("tensor '%s': GraVAC compression runs on the global process set only; "
                         "allreduce on process set %d uncompressed (compression=None)"
                         % (name, process_set.process_set_id))
    code = _dtype_code(tensor, name)
    in_place = output is tensor
    if _device_path(context, tensor):
        return _allreduce_device_async(context, tensor, in_place, name, code, op,
                                       prescale_factor, postscale_factor, step, samples,
                                       compress, ranks, process_set)
    buf = _host_buffer(tensor)
    if prescale_factor != 1.0:
        if in_place and _shares_memory(buf, tensor):
            buf.copy_(_scaled(buf, prescale_factor))
        else:
            buf = _scaled(buf, prescale_factor).contiguous()
    if in_place:
        out = buf
    else:
        out = torch.empty_like(buf, memory_format=torch.contiguous_format)
    request = _submit(name, lambda: context.allreduce_async(
        name, buf.data_ptr(), out.data_ptr(), list(buf.shape), code, op, step, samples,
        bool(compress), process_set=ranks))

    def finish():
        if postscale_factor != 1.0:
            out.copy_(_scaled(out, postscale_factor))
        if in_place:
            if not _shares_memory(out, tensor):
                tensor.detach().copy_(out)
            return tensor
        return out if tensor.device.type == "cpu" else out.to(tensor.device)

    return _state.add(_Pending(request, (buf, out, tensor), finish, name,
                               process_set.process_set_id if ranks else 0))


def _allreduce_device_async(context, tensor, in_place, name, code, op, prescale_factor,
                            postscale_factor, step, samples, compress, ranks, process_set):
    """_allreduce_async of a CUDA tensor: the tensor stays on its device; gravacd reads it after
    the work queued on the current stream and the stream waits for the result at synchronize()."""
    buf = tensor.detach()
    if not buf.is_contiguous():
        buf = buf.contiguous()
    if prescale_factor != 1.0:
        if in_place and buf.data_ptr() == tensor.data_ptr():
            buf.copy_(_scaled(buf, prescale_factor))
        else:
            buf = _scaled(buf, prescale_factor).contiguous()
    out = buf if in_place else torch.empty_like(buf, memory_format=torch.contiguous_format)
    device = tensor.device.index if tensor.device.index is not None else torch.cuda.current_device()
    stream = torch.cuda.current_stream(device).cuda_stream
    request = _submit(name, lambda: context.allreduce_device_async(
        name, buf.data_ptr(), out.data_ptr(), list(buf.shape), code, op, step, samples,
        bool(compress), process_set=ranks, device=device, stream=stream))

    def finish():
        if postscale_factor != 1.0:
            out.copy_(_scaled(out, postscale_factor))
        if in_place:
            if out.data_ptr() != tensor.data_ptr():
                tensor.detach().copy_(out)
            return tensor
        return out

    return _state.add(_Pending(request, (buf, out, tensor), finish, name,
                               process_set.process_set_id if ranks else 0))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce of `tensor` into a new tensor; returns a handle for synchronize()."""
    return _allreduce_async(tensor, None, name, _resolve_op(average, op), prescale_factor,
                            postscale_factor, process_set=process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an in-place allreduce of `tensor`; returns a handle for synchronize()."""
    return _allreduce_async(tensor, tensor, name, _resolve_op(average, op), prescale_factor,
                            postscale_factor, process_set=process_set)


class _AllreduceFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        handle = _allreduce_async(tensor, None, name, op, prescale_factor, postscale_factor,
                                  process_set=process_set)
        return synchronize(handle)

    @staticmethod
    def backward(ctx, grad_output):
        handle = _allreduce_async(grad_output, None, None, ctx.op, ctx.prescale_factor,
                                  ctx.postscale_factor, process_set=ctx.process_set)
        return synchronize(handle), None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    """Sum or average of `tensor` over all ranks (of `process_set`), as a new tensor
    (differentiable).

    `compression` is a Compressor (gravac.torch.Compression.*); GraVAC compressors let the daemon
    compress the tensor at the job's compression factor (global process set only).
    """
    op = _resolve_op(average, op)
    if compression is None:
        return _AllreduceFunction.apply(tensor, name, op, prescale_factor, postscale_factor,
                                        process_set)
    compressed, cctx = compression.compress(tensor)
    handle = _allreduce_async(compressed, None, name, op, prescale_factor, postscale_factor,
                              compress=_daemon_compress(compression, compressed),
                              process_set=process_set)
    return compression.decompress(synchronize(handle), cctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In-place sum or average of `tensor` over all ranks; returns `tensor`."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set=process_set))


def _daemon_compress(compression, tensor):
    compresses = getattr(compression, "compresses", None)  # GravacCompressor: dtype and size
    compress = bool(getattr(compression, "daemon_compress", False)) and (
        compresses(tensor) if compresses is not None else tensor.dtype == torch.float32)
    if compress:
        use = getattr(_state.ctx(), "use_compressor", None)  # a world of one compresses here
        if use is not None:
            use(compression)
    return compress


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Starts an allgather (concatenation along dim 0 in rank order; first dims may differ)."""
    context = _state.ctx()
    name = _state.auto_name("allgather", name, process_set)
    ranks = _sets.wire_ranks(process_set, name)
    buf = _host_buffer(tensor)
    if buf.dim() == 0:
        buf = buf.reshape(1)
    wire = _wire_view(buf)
    code = _dtype_code(wire, name)
    row_shape = tuple(wire.shape[1:])
    request = _submit(name, lambda: context.allgather_async(name, wire.data_ptr(),
                                                            list(wire.shape), code,
                                                            process_set=ranks))

    def finish():
        total, nbytes = request.allgather_size()
        out = torch.empty((total,) + row_shape, dtype=wire.dtype)
        if nbytes:
            request.allgather_copy(out.data_ptr(), nbytes)
        out = out.view(buf.dtype)
        return out if tensor.device.type == "cpu" else out.to(tensor.device)

    return _state.add(_Pending(request, (buf,), finish, name,
                               process_set.process_set_id if ranks else 0))


class _AllgatherFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim0 = tensor.shape[0] if tensor.dim() > 0 else 1
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set=process_set))

    @staticmethod
    def backward(ctx, grad_output):
        # Horovod's gradient: the average over ranks of the incoming gradient, sliced to this
        # rank's rows.
        ps = ctx.process_set
        averaged = synchronize(_allreduce_async(grad_output, None, None, Average, 1.0, 1.0,
                                                process_set=ps))
        dims = synchronize(allgather_async(torch.tensor([ctx.dim0], dtype=torch.int64),
                                           process_set=ps))
        offset = int(dims[:_sets.set_rank(ps)].sum())
        return averaged.narrow(0, offset, ctx.dim0), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenation of every rank's `tensor` along dim 0 in rank order (differentiable)."""
    return _AllgatherFunction.apply(tensor, name, process_set)


def _broadcast_async(tensor, output, root_rank, name, process_set=global_process_set):
    context = _state.ctx()
    name = _state.auto_name("broadcast", name, process_set)
    ranks = _sets.wire_ranks(process_set, name)
    if ranks and int(root_rank) not in ranks:
        raise ValueError("tensor '%s': root_rank %d is not in process set %d (ranks %s)"
                         % (name, root_rank, process_set.process_set_id, ranks))
    in_place = output is tensor
    buf = _host_buffer(tensor)
    if not in_place and _shares_memory(buf, tensor):
        buf = buf.clone()
    wire = _wire_view(buf.reshape(1) if buf.dim() == 0 else buf)
    code = _dtype_code(wire, name)
    request = _submit(name, lambda: context.broadcast_async(name, wire.data_ptr(),
                                                            list(wire.shape), code,
                                                            int(root_rank), process_set=ranks))

    def finish():
        if in_place:
            if not _shares_memory(buf, tensor):
                tensor.detach().copy_(buf)
            return tensor
        return buf if tensor.device.type == "cpu" else buf.to(tensor.device)

    return _state.add(_Pending(request, (buf, tensor), finish, name,
                               process_set.process_set_id if ranks else 0))


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts a broadcast of root_rank's `tensor` into a new tensor; returns a handle."""
    return _broadcast_async(tensor, None, root_rank, name, process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """Starts an in-place broadcast of root_rank's `tensor`; returns a handle."""
    return _broadcast_async(tensor, tensor, root_rank, name, process_set)


class _BroadcastFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        # Horovod's gradient: the average over ranks on the root, zero elsewhere.
        averaged = synchronize(_allreduce_async(grad_output, None, None, Average, 1.0, 1.0,
                                                process_set=ctx.process_set))
        if rank() != ctx.root_rank:
            averaged = averaged * 0
        return averaged, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's `tensor` on every rank (of `process_set`), as a new tensor (differentiable)."""
    return _BroadcastFunction.apply(tensor, root_rank, name, process_set)


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites `tensor` with root_rank's on every rank; returns `tensor`."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def poll(handle):
    """True when the operation of `handle` completed (synchronize() will not block)."""
    return _state.get(handle).request.poll()


def _wait(handle):
    """Waits for `handle`; returns (result tensor, (theta, collective, decision_epoch))."""
    pending = _state.pop(handle)
    try:
        pending.request.wait()
    finally:
        _state.release(pending.name)
    result = pending.finish()
    try:
        info = pending.request.info()
    except GravacError:
        info = None
    return result, info


def synchronize(handle):
    """Waits for the operation of `handle` and returns its result tensor.

    Raises GravacError with the daemon's message (it names the rank, tensor and field) when the
    operation failed on any rank, e.g. for mismatched shapes.
    """
    return _wait(handle)[0]


__all__ = [
    "Average", "Sum", "Adasum", "Min", "Max", "Product", "GravacError", "init", "shutdown",
    "is_initialized", "rank", "size", "local_rank", "local_size", "cross_rank", "cross_size",
    "is_homogeneous", "barrier", "mpi_built", "gloo_built", "nccl_built",
    "mpi_enabled", "gloo_enabled", "mpi_threads_supported", "allreduce", "allreduce_", "allreduce_async",
    "allreduce_async_", "allgather", "allgather_async", "broadcast", "broadcast_",
    "broadcast_async", "broadcast_async_", "poll", "synchronize",
]
