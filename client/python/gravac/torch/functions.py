"""Model and optimizer state helpers (Horovod's ``horovod.torch.functions``).

broadcast_parameters / broadcast_optimizer_state make every replica start from root_rank's
state; broadcast_object / allgather_object move picklable Python objects (serialized with
torch.save, so tensors inside them keep their dtype). All of them block until done and raise
GravacError on failure.
"""

import io

import torch

from gravac.torch import mpi_ops
from gravac.torch.process_sets import global_process_set


def broadcast_parameters(params, root_rank, prefix="bcast.", process_set=global_process_set):
    """Overwrites the tensors in `params` with root_rank's, in place.

    `params` is a state_dict (``model.state_dict()``), a sequence of (name, tensor) pairs
    (``model.named_parameters()``) or of tensors (``model.parameters()``, as Horovod); tensors
    are named ``prefix + name``, unnamed ones ``prefix + "list." + position``.
    """
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, (list, tuple)) or hasattr(params, "__iter__"):
        items = [item if isinstance(item, tuple) else ("list.%d" % i, item)
                 for i, item in enumerate(params)]
        if any(len(item) != 2 for item in items):
            raise ValueError("params must be a dict or a sequence of tensors or of (name, "
                             "tensor) pairs")
    else:
        raise ValueError("invalid params of type: %s" % type(params))
    handles = []
    for name, p in items:
        if p is None:
            continue
        if not torch.is_tensor(p):
            raise ValueError("broadcast_parameters: %s is a %s, not a tensor" % (name, type(p)))
        handles.append(mpi_ops.broadcast_async_(p, root_rank, prefix + str(name), process_set))
    error = None
    for handle in handles:
        try:
            mpi_ops.synchronize(handle)
        except Exception as e:  # wait for the others: their buffers are still written
            error = error or e
    if error is not None:
        raise error


def _to_bytes(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def _from_bytes(tensor):
    return torch.load(io.BytesIO(tensor.numpy().tobytes()), map_location="cpu")


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """root_rank's `obj` (any object torch.save can serialize) on every rank (of
    `process_set`)."""
    name = name or mpi_ops._state.auto_name("broadcast_object", None, process_set)
    if mpi_ops.rank() == root_rank:
        payload = _to_bytes(obj)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        payload = None
        length = torch.zeros(1, dtype=torch.int64)
    mpi_ops.broadcast_(length, root_rank, name + ".len", process_set)
    if payload is None:
        payload = torch.zeros(int(length.item()), dtype=torch.uint8)
    mpi_ops.broadcast_(payload, root_rank, name + ".data", process_set)
    return obj if mpi_ops.rank() == root_rank else _from_bytes(payload)


def allgather_object(obj, name=None, process_set=global_process_set):
    """The list of every rank's (of `process_set`) `obj`, in rank order."""
    name = name or mpi_ops._state.auto_name("allgather_object", None, process_set)
    payload = _to_bytes(obj)
    lengths = mpi_ops.synchronize(mpi_ops.allgather_async(
        torch.tensor([payload.numel()], dtype=torch.int64), name + ".len", process_set))
    gathered = mpi_ops.synchronize(mpi_ops.allgather_async(payload, name + ".data",
                                                           process_set))
    result, offset = [], 0
    for n in lengths.tolist():
        result.append(_from_bytes(gathered[offset:offset + n]))
        offset += n
    return result


def broadcast_optimizer_state(optimizer, root_rank, name="optimizer_state",
                              process_set=global_process_set):
    """Loads root_rank's optimizer state (state and param_groups options) on every rank.

    As Horovod's: an optimizer without state yet first gets zero gradients for the parameters
    that need one and takes one step (the wrapped optimizer's own step for a
    DistributedOptimizer, so no collective runs), so that its state exists on every rank.
    """
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    if len(optimizer.state_dict()["state"]) == 0:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    p.grad = torch.zeros_like(p)
        if getattr(optimizer, "_gravac_distributed", False):
            super(optimizer.__class__, optimizer).step()
        else:
            optimizer.step()
    state_dict = broadcast_object(optimizer.state_dict(), root_rank, name, process_set)
    if mpi_ops.rank() != root_rank:
        optimizer.load_state_dict(state_dict)
