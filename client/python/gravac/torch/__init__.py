"""gravac.torch: a Horovod-compatible PyTorch API over gravac.

``import gravac.torch as hvd`` runs common Horovod scripts::

    hvd.init()
    model = ...; optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=hvd.Compression.gravac())

The job is started by gravacrun (``gravacrun -np 4 --nodes 2 -- python3 train.py``), which sets
the GRAVAC_* environment init() reads; without it init() runs a world of one. Tensors are CPU
tensors of float32/float64/float16/bfloat16/int32/int64/uint8/int8/int16/bool (other devices are
staged through host memory). Failures (mismatched
shapes across ranks, a dead worker, ...) raise GravacError carrying the daemon's message; those of
the world rather than of the call (a lost worker, daemon or node, a timeout) raise its subclass
HorovodInternalError, which ``hvd.elastic.run`` (Horovod's elastic API, gravac.torch.elastic)
catches to restore the last commit. A daemon or controller that refuses the worker's job (a job
the daemon does not serve, no free worker slots, a run id that already ended, an exhausted
data-port range) makes init() or the first collective raise JobRefusedError, a GravacError whose
message names the job and the node; retrying the same job unchanged does not help.
"""

from gravac._gravac import GravacError, HorovodInternalError, JobRefusedError
from gravac.torch.compression import Compression, Compressor
from gravac.torch.functions import (allgather_object, broadcast_object,
                                    broadcast_optimizer_state, broadcast_parameters)
from gravac.torch.dense_ops import (alltoall, grouped_allreduce, grouped_allreduce_,
                                    grouped_allreduce_async, grouped_allreduce_async_,
                                    reducescatter, reducescatter_async)
from gravac.torch.mpi_ops import (Adasum, Average, Max, Min, Product, Sum, allgather,
                                  allgather_async, allreduce, allreduce_, allreduce_async,
                                  allreduce_async_, barrier, broadcast, broadcast_, join,
                                  broadcast_async, broadcast_async_, cross_rank, cross_size,
                                  gloo_built, gloo_enabled, init, is_homogeneous, is_initialized,
                                  local_rank, local_size, mpi_built, mpi_enabled,
                                  mpi_threads_supported, nccl_built, cuda_built, poll, rank,
                                  shutdown, size, start_timeline, stop_timeline, synchronize)
from gravac.torch.optimizer import DistributedOptimizer
from gravac.torch.process_sets import (ProcessSet, add_process_set, global_process_set,
                                       process_set_by_id, remove_process_set)
from gravac.torch.sync_batch_norm import SyncBatchNorm
from gravac.torch import elastic

__all__ = [
    "ProcessSet", "add_process_set", "global_process_set", "process_set_by_id",
    "remove_process_set",
    "Adasum", "Max", "Min", "Product", "SyncBatchNorm", "alltoall", "cross_rank", "cross_size",
    "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
    "grouped_allreduce_async_", "is_homogeneous", "join", "reducescatter", "reducescatter_async",
    "Average", "Sum", "elastic", "Compression", "Compressor", "DistributedOptimizer", "GravacError",
    "HorovodInternalError", "JobRefusedError", "allgather", "allgather_async", "allgather_object", "allreduce",
    "allreduce_", "allreduce_async", "allreduce_async_", "barrier", "broadcast", "broadcast_",
    "broadcast_async", "broadcast_async_", "broadcast_object", "broadcast_optimizer_state",
    "broadcast_parameters", "gloo_built", "gloo_enabled", "init", "is_initialized", "local_rank",
    "local_size", "mpi_built", "mpi_enabled", "mpi_threads_supported", "nccl_built", "cuda_built", "poll",
    "rank", "shutdown", "size", "start_timeline", "stop_timeline", "synchronize",
]
