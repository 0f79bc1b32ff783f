"""Horovod's collectives that gravacd does not reduce itself, built on its allgather/allreduce.

gravacd reduces Sum and Average (and compresses them). Everything here runs dense, gives every
rank the same result, and refuses compression:

* allreduce with ``Min``, ``Max``, ``Product`` or ``Adasum``: each rank's tensor is allgathered
  and reduced locally in rank order, so the result is exact and identical on every rank.
  Traffic is size× an allreduce's: these ops are meant for metrics and flags, not gradients.
* ``Adasum`` (Horovod's definition, Maleki et al. 2020): ranks are combined pairwise up a binary
  tree (0+1, 2+3, then (01)+(23), ...) by
  ``adasum(a, b) = (1 - a·b / 2|a|²) a + (1 - a·b / 2|b|²) b`` with the dot products over the
  whole tensor (a coefficient stays 1 when its norm² is below 1e-8, as Horovod's), in float64.
  The tree needs a power-of-two world size; other sizes are refused naming the size.
  DistributedOptimizer(op=Adasum) combines weight changes with it (optimizer.py).
* int8, int16, uint8 and bool: Sum/Average of int8/int16 are reduced as int32 and wrapped back
  (Horovod sums in the tensor's own type); bool takes Min (and), Max (or) or Product (and), not
  Sum or Average.
* grouped_allreduce: one handle for a list of tensors (the daemon fuses them; a failure of one
  fails the group on every rank).
* reducescatter: the allreduce (Sum or Average), then this rank's rows: dim 0 is split as
  Horovod splits it, the first ``dim0 % size`` ranks get one row more.
* alltoall: every rank's splits (rows it sends to each rank) are allgathered first with a
  validity flag, so a rank whose splits are bad makes every rank raise naming it; then the rows
  travel in one allgather and each rank keeps what was sent to it. Returns
  ``(output, received_splits)`` as Horovod's.

Thread-safety: as mpi_ops (handles are synchronized once).
"""

import torch

from gravac.torch import mpi_ops
from gravac.torch import process_sets as _sets
from gravac.torch.process_sets import global_process_set

_WIDEN = {torch.int8: torch.int32, torch.int16: torch.int32}
_REDUCERS = {
    mpi_ops.Min: lambda stacked: torch.amin(stacked, dim=0),
    mpi_ops.Max: lambda stacked: torch.amax(stacked, dim=0),
    mpi_ops.Product: lambda stacked: torch.prod(stacked, dim=0, dtype=stacked.dtype),
}


def _finish_into(tensor, output, result):
    """Puts `result` where the caller asked: a new tensor, or `tensor` itself (in place)."""
    if output is tensor:
        tensor.detach().copy_(result.to(tensor.device))
        return tensor
    return result.to(tensor.device)


def adasum_combine(a, b):
    """Horovod's pairwise Adasum of two float64 vectors."""
    dot = torch.dot(a, b)
    anormsq, bnormsq = torch.dot(a, a), torch.dot(b, b)
    acoeff = 1.0 - dot / anormsq * 0.5 if anormsq >= 1e-8 else 1.0
    bcoeff = 1.0 - dot / bnormsq * 0.5 if bnormsq >= 1e-8 else 1.0
    return acoeff * a + bcoeff * b


def adasum_tree(rows):
    """Adasum of the rows (one per rank, rank order) up a binary tree; len(rows) a power of 2."""
    level = list(rows)
    while len(level) > 1:
        level = [adasum_combine(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def _check_adasum(name, tensor):
    n = mpi_ops.size()
    if n & (n - 1):
        raise ValueError("tensor '%s': Adasum combines ranks up a binary tree and needs a "
                         "power-of-two world size, not %d; use Average (or Sum)" % (name, n))
    if not tensor.dtype.is_floating_point:
        raise ValueError("tensor '%s': Adasum needs a floating-point tensor, not %s"
                         % (name, tensor.dtype))


def allreduce_async(tensor, output, name, op, prescale_factor, postscale_factor,
                    process_set=global_process_set):
    """mpi_ops._allreduce_async for the ops and dtypes gravacd does not reduce (see module)."""
    name = mpi_ops._state.auto_name("allreduce", name, process_set)
    dtype = tensor.dtype
    if op in (mpi_ops.Sum, mpi_ops.Average):
        if dtype == torch.bool:
            raise ValueError("tensor '%s': bool tensors reduce with Min (and), Max (or) or "
                             "Product, not %s" % (name, mpi_ops._OP_NAMES[op]))
        wide = _WIDEN.get(dtype)
        if wide is None:
            raise ValueError("tensor '%s': dtype %s is not supported by gravac" % (name, dtype))
        widened = mpi_ops._scaled(tensor.detach(), prescale_factor).to(wide)
        handle = mpi_ops._allreduce_async(widened, None, name, op, 1.0, postscale_factor,
                                          process_set=process_set)
        return mpi_ops._state.then(handle,
                                   lambda result: _finish_into(tensor, output, result.to(dtype)))
    if op == mpi_ops.Adasum:
        if process_set is not global_process_set:
            raise ValueError("tensor '%s': Adasum runs on the global process set only" % name)
        _check_adasum(name, tensor)
    elif op not in _REDUCERS:
        raise ValueError("tensor '%s': unknown op %r" % (name, op))
    shape = tensor.shape
    scaled = mpi_ops._scaled(tensor.detach(), prescale_factor)
    if dtype == torch.bool:
        scaled = tensor.detach()
    handle = mpi_ops.allgather_async(scaled.reshape(1, -1), name, process_set)

    def reduce(stacked):
        if op == mpi_ops.Adasum:
            rows = stacked.double()
            result = adasum_tree([rows[i] for i in range(rows.shape[0])]).to(dtype)
        elif dtype == torch.bool:
            result = _REDUCERS[op](stacked.to(torch.uint8)).to(torch.bool)
        else:
            result = _REDUCERS[op](stacked)
        result = result.reshape(shape)
        if dtype != torch.bool and postscale_factor != 1.0:
            result = mpi_ops._scaled(result, postscale_factor)
        return _finish_into(tensor, output, result)

    return mpi_ops._state.then(handle, reduce)


class _Group:
    """The requests of a grouped call, waited on together (mpi_ops._Pending.request)."""

    def __init__(self, pendings):
        self.pendings = pendings

    def wait(self):
        error = None
        for p in self.pendings:
            try:
                p.request.wait()
            except Exception as e:  # wait for every member: their buffers are still written
                error = error or e
            finally:
                mpi_ops._state.release(p.name)
        if error is not None:
            raise error

    def poll(self):
        return all(p.request.poll() for p in self.pendings)

    def info(self):
        return self.pendings[0].request.info()


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, in_place=False, process_set=global_process_set):
    """Starts allreduces of every tensor of `tensors`; one handle, whose result is the list."""
    op = mpi_ops._resolve_op(average, op)
    tensors = list(tensors)
    if not tensors:
        raise ValueError("grouped_allreduce needs at least one tensor")
    base = mpi_ops._state.auto_name("grouped_allreduce", name, process_set)
    pendings = []
    try:
        for i, t in enumerate(tensors):
            handle = mpi_ops._allreduce_async(t, t if in_place else None, "%s.%d" % (base, i),
                                              op, prescale_factor, postscale_factor,
                                              process_set=process_set)
            pendings.append(mpi_ops._state.pop(handle))
    except Exception:
        for p in pendings:  # already posted: wait so that their buffers stay valid
            try:
                p.request.wait()
            except Exception:  # pylint: disable=broad-except
                pass
            mpi_ops._state.release(p.name)
        raise
    group = _Group(pendings)
    keep = tuple(p.keep for p in pendings)
    finish = lambda: [p.finish() for p in pendings]  # noqa: E731
    # The members' names are released by _Group.wait; the group's own name is never reserved.
    return mpi_ops._state.add(mpi_ops._Pending(group, keep, finish, base + ".group",
                                               pendings[0].set_id))


def grouped_allreduce(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set):
    """The allreduce of every tensor of `tensors`, as a list of new tensors."""
    return mpi_ops.synchronize(grouped_allreduce_async(tensors, average, name, op,
                                                       prescale_factor, postscale_factor,
                                                       process_set=process_set))


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce of every tensor of `tensors`; returns the list."""
    return mpi_ops.synchronize(grouped_allreduce_async(tensors, average, name, op,
                                                       prescale_factor, postscale_factor,
                                                       in_place=True, process_set=process_set))


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    return grouped_allreduce_async(tensors, average, name, op, prescale_factor,
                                   postscale_factor, in_place=True, process_set=process_set)


def _scatter_rows(dim0, n):
    """Horovod's split of dim0 rows over n ranks: the first dim0 % n get one more."""
    return [dim0 // n + (1 if r < dim0 % n else 0) for r in range(n)]


def reducescatter_async(tensor, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                        process_set=global_process_set):
    """Starts a reduce-scatter: the reduction (Sum or Average, default Average) of `tensor`
    over ranks (of `process_set`), of which this rank gets its share of dim 0."""
    op = mpi_ops.Average if op is None else op
    name = mpi_ops._state.auto_name("reducescatter", name, process_set)
    _sets.wire_ranks(process_set, name)  # this rank is in the set
    if op not in (mpi_ops.Sum, mpi_ops.Average):
        raise ValueError("tensor '%s': reducescatter reduces with Sum or Average, not %s"
                         % (name, mpi_ops._OP_NAMES.get(op, op)))
    if tensor.dim() == 0:
        raise ValueError("tensor '%s': reducescatter needs at least one dimension" % name)
    rows = _scatter_rows(tensor.shape[0], _sets.set_size(process_set))
    r = _sets.set_rank(process_set)
    offset = sum(rows[:r])
    handle = mpi_ops._allreduce_async(tensor, None, name, op, prescale_factor, postscale_factor,
                                      process_set=process_set)
    return mpi_ops._state.then(handle, lambda full: full.narrow(0, offset, rows[r]).clone())


def reducescatter(tensor, name=None, op=None, prescale_factor=1.0, postscale_factor=1.0,
                  process_set=global_process_set):
    """This rank's rows of the reduction of `tensor` over ranks (Horovod's reducescatter)."""
    return mpi_ops.synchronize(reducescatter_async(tensor, name, op, prescale_factor,
                                                   postscale_factor, process_set))


def _splits_problem(tensor, splits, n):
    """None if `splits` are valid for `tensor`, else what is wrong with them."""
    if tensor.dim() == 0:
        return "alltoall needs at least one dimension"
    dim0 = tensor.shape[0]
    if splits is None:
        if dim0 % n:
            return "dim 0 (%d rows) does not divide evenly over %d ranks; pass splits" % (dim0, n)
        return None
    if splits.dim() != 1 or splits.numel() != n:
        return "splits has shape %s, must be one entry per rank (%d)" % (tuple(splits.shape), n)
    values = splits.tolist()
    if any(v < 0 for v in values):
        return "splits %s has a negative entry" % values
    if sum(values) != dim0:
        return "splits %s add up to %d, not dim 0 (%d rows)" % (values, sum(values), dim0)
    return None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[j] rows of `tensor` (in order) to rank j (of `process_set`, j its index
    there); returns (output, received_splits): the rows every rank sent here, in rank order, and
    how many came from each."""
    name = mpi_ops._state.auto_name("alltoall", name, process_set)
    _sets.wire_ranks(process_set, name)  # this rank is in the set
    n, r = _sets.set_size(process_set), _sets.set_rank(process_set)
    if splits is not None:
        splits = torch.as_tensor(splits).reshape(-1) if not torch.is_tensor(splits) else splits
        if splits.dtype.is_floating_point or splits.dtype == torch.bool:
            raise ValueError("tensor '%s': splits must be integers, not %s"
                             % (name, splits.dtype))
    problem = _splits_problem(tensor, splits, n)
    if problem is None:
        if splits is None:
            values = [tensor.shape[0] // n] * n
        else:
            values = [int(v) for v in splits.tolist()]
        row = torch.tensor([[1] + values], dtype=torch.int64)
    else:
        row = torch.zeros((1, n + 1), dtype=torch.int64)
    table = mpi_ops.synchronize(mpi_ops.allgather_async(row, name + ".splits", process_set))
    members = _sets.set_ranks(process_set)
    bad = [members[k] for k in range(n) if table[k, 0] == 0]
    if bad:
        raise ValueError("alltoall '%s': the splits of rank(s) %s are invalid%s"
                         % (name, ", ".join(map(str, bad)),
                            ("; this rank's: " + problem) if problem else ""))
    sent = table[:, 1:]  # sent[j, k]: rows rank j sends to rank k
    gathered = mpi_ops.synchronize(mpi_ops.allgather_async(tensor.detach(), name + ".data",
                                                           process_set))
    pieces, start = [], 0
    for j in range(n):
        rows_j = int(sent[j].sum())
        begin = start + int(sent[j, :r].sum())
        pieces.append(gathered.narrow(0, begin, int(sent[j, r])))
        start += rows_j
    output = torch.cat(pieces, dim=0) if pieces else gathered[:0]
    received = sent[:, r].clone()
    return output.to(tensor.device), received
