"""Horovod's process sets: collectives on a subset of the job's ranks.

A ProcessSet names global ranks; ``hvd.init(process_sets=[...])`` or ``hvd.add_process_set`` (both
called by every rank, with the same sets) registers it and gives it an id. A collective called
with ``process_set=ps`` is posted by the ranks of ``ps`` alone and completes when they all posted
it: gravacd waits for the set's local ranks only, negotiates it among the nodes that hold its
ranks, and runs it on the communicator of those nodes (an average divides by ``ps.size()``).

Bad input raises ValueError at once on the calling rank: a set that is empty, names a rank twice
or a rank outside the job; sets that differ between ranks (named, on every rank, by
init/add_process_set); a collective on a set the rank is not in, or on a removed set; removing a
set with collectives still in flight. GraVAC compression applies to the global set only.
"""

import threading


class ProcessSet:
    """A set of global ranks that run collectives together (Horovod's ProcessSet).

    ``process_set_id`` is None until init() or add_process_set() registered it.
    """

    def __init__(self, ranks):
        try:
            ranks = [int(r) for r in ranks]
        except TypeError:
            raise ValueError("ProcessSet takes a list of global ranks, not %r" % (ranks,)) from None
        if not ranks:
            raise ValueError("a process set needs at least one rank")
        seen = set()
        for r in ranks:
            if r in seen:
                raise ValueError("process set %s names rank %d twice" % (sorted(ranks), r))
            if r < 0:
                raise ValueError("process set %s names rank %d, which is negative"
                                 % (sorted(ranks), r))
            seen.add(r)
        self.ranks = sorted(ranks)
        self.process_set_id = None

    def size(self):
        """The number of ranks in the set."""
        return len(_ranks_of(self))

    def rank(self):
        """This process's rank within the set (its index in ranks); -1 when not included."""
        me = _mpi_ops().rank()
        ranks = _ranks_of(self)
        return ranks.index(me) if me in ranks else -1

    def included(self):
        """Whether this process is in the set."""
        return _mpi_ops().rank() in _ranks_of(self)

    def __repr__(self):
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (self.process_set_id, self.ranks)


class _GlobalProcessSet(ProcessSet):
    """Every rank of the job (id 0); its ranks are the job's once initialized."""

    def __init__(self):  # pylint: disable=super-init-not-called
        self.process_set_id = 0

    @property
    def ranks(self):
        return list(range(_mpi_ops().size()))

    def __repr__(self):
        return "ProcessSet(process_set_id=0, ranks=all)"


global_process_set = _GlobalProcessSet()


class _Registry:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_id = {}
        self.next_id = 1

    def reset(self):
        with self.lock:
            for ps in self.by_id.values():
                ps.process_set_id = None
            self.by_id.clear()
            self.next_id = 1


_registry = _Registry()


def _mpi_ops():
    from gravac.torch import mpi_ops  # pylint: disable=import-outside-toplevel
    return mpi_ops


def _allgather_object(obj, name):
    from gravac.torch import functions  # pylint: disable=import-outside-toplevel
    return functions.allgather_object(obj, name=name)


def _ranks_of(process_set):
    if process_set is global_process_set or process_set is None:
        return list(range(_mpi_ops().size()))
    if process_set.process_set_id is None:
        raise ValueError("%r is not registered (pass it to hvd.init(process_sets=...) or "
                         "hvd.add_process_set) or was removed" % (process_set,))
    return process_set.ranks


def wire_ranks(process_set, name):
    """The ranks a collective of tensor `name` sends to gravacd for `process_set`: [] for the
    whole job. Raises ValueError when this rank is not in the set or the set is not registered."""
    if process_set is None or process_set is global_process_set:
        return []
    if not isinstance(process_set, ProcessSet):
        raise ValueError("tensor '%s': process_set must be a ProcessSet, not %r"
                         % (name, process_set))
    ranks = _ranks_of(process_set)
    ops = _mpi_ops()
    me = ops.rank()
    if me not in ranks:
        raise ValueError("tensor '%s': rank %d is not in process set %d (ranks %s); only the "
                         "ranks of a set call its collectives"
                         % (name, me, process_set.process_set_id, ranks))
    return [] if len(ranks) == ops.size() else list(ranks)


def set_ranks(process_set):
    """The global ranks of `process_set` (every rank for the global one)."""
    return list(_ranks_of(process_set))


def set_size(process_set):
    return len(_ranks_of(process_set))


def set_rank(process_set):
    """This rank's index in the set (the caller is in it)."""
    return _ranks_of(process_set).index(_mpi_ops().rank())


def _check_agreement(what, rank_lists):
    """Every rank passes the same `rank_lists`; raises ValueError on every rank otherwise."""
    everyone = _allgather_object(rank_lists, "gravac.process_sets." + what)
    differ = [r for r, lists in enumerate(everyone) if lists != everyone[0]]
    if differ:
        raise ValueError("%s: the process sets differ between ranks: ranks %s pass %s, rank 0 "
                         "passes %s; every rank must pass the same sets"
                         % (what, differ, everyone[differ[0]], everyone[0]))


def _check_ranks(process_set):
    size = _mpi_ops().size()
    outside = [r for r in process_set.ranks if r >= size]
    if outside:
        raise ValueError("process set %s names rank(s) %s outside the job (size %d)"
                         % (process_set.ranks, outside, size))


def _register(process_set):
    with _registry.lock:
        for ps in _registry.by_id.values():
            if ps.ranks == process_set.ranks and ps is not process_set:
                raise ValueError("a process set with ranks %s exists already (id %d)"
                                 % (ps.ranks, ps.process_set_id))
        process_set.process_set_id = _registry.next_id
        _registry.by_id[_registry.next_id] = process_set
        _registry.next_id += 1
    return process_set


def _as_process_set(process_set):
    if isinstance(process_set, ProcessSet):
        if process_set is global_process_set:
            raise ValueError("the global process set is always registered")
        return process_set
    return ProcessSet(process_set)


def init_process_sets(process_sets):
    """hvd.init(process_sets=...): registers them (ids 1, 2, ... in the order given)."""
    _registry.reset()
    if process_sets is None:
        return
    if process_sets == "dynamic":
        return
    sets = [_as_process_set(ps) for ps in process_sets]
    for ps in sets:
        _check_ranks(ps)
    _check_agreement("init", [ps.ranks for ps in sets])
    for ps in sets:
        _register(ps)


def add_process_set(process_set):
    """Registers a process set (a ProcessSet or a list of ranks) on every rank; returns it.

    Every rank must call it with the same ranks, as Horovod requires.
    """
    ps = _as_process_set(process_set)
    _check_ranks(ps)
    _check_agreement("add_process_set", [ps.ranks])
    return _register(ps)


def remove_process_set(process_set):
    """Removes a registered process set on every rank (all call it); returns False for the global
    set (it cannot be removed), True otherwise. Collectives of the set still in flight (not
    synchronized) raise ValueError naming them."""
    if process_set is global_process_set or process_set.process_set_id == 0:
        return False
    if process_set.process_set_id is None:
        raise ValueError("%r is not registered" % (process_set,))
    ops = _mpi_ops()
    busy = ops._state.names_on_set(process_set.process_set_id)  # pylint: disable=protected-access
    # Every rank learns every rank's view, so that all of them raise together (none waits).
    everyone = _allgather_object((process_set.ranks, sorted(busy)),
                                 "gravac.process_sets.remove_process_set")
    in_use = {r: names for r, (_, names) in enumerate(everyone) if names}
    if in_use:
        raise ValueError("remove_process_set: process set %d (ranks %s) is in use: collectives "
                         "in flight on rank(s) %s (%s); synchronize them first"
                         % (process_set.process_set_id, process_set.ranks, sorted(in_use),
                            "; ".join("rank %d: %s" % (r, ", ".join(n))
                                      for r, n in sorted(in_use.items()))))
    differ = [r for r, (ranks, _) in enumerate(everyone) if ranks != everyone[0][0]]
    if differ:
        raise ValueError("remove_process_set: the process sets differ between ranks: ranks %s "
                         "pass %s, rank 0 passes %s" % (differ, everyone[differ[0]][0],
                                                        everyone[0][0]))
    with _registry.lock:
        _registry.by_id.pop(process_set.process_set_id, None)
        process_set.process_set_id = None
    return True


def process_set_by_id(process_set_id):
    if process_set_id == 0:
        return global_process_set
    with _registry.lock:
        ps = _registry.by_id.get(process_set_id)
    if ps is None:
        raise ValueError("no registered process set with id %d" % process_set_id)
    return ps


def get_process_sets():
    """Every registered process set, the global one first (Horovod's process_sets())."""
    with _registry.lock:
        return [global_process_set] + [_registry.by_id[k] for k in sorted(_registry.by_id)]


__all__ = ["ProcessSet", "add_process_set", "get_process_sets", "global_process_set",
           "process_set_by_id", "remove_process_set"]
