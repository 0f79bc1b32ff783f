"""Horovod's elastic API for PyTorch (``horovod.torch.elastic``, reached as ``hvd.elastic``).

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch, (x, y) in enumerate(loader):   # loader over state.train_sampler
                ...; optimizer.step()
                state.train_sampler.record_batch(state.batch, batch_size)
                if state.batch % batches_per_commit == 0:
                    state.commit()
            state.batch = 0
            state.train_sampler.set_epoch(state.epoch + 1)
            state.commit()

    state = hvd.elastic.TorchState(model, optimizer, train_sampler=sampler, epoch=0, batch=0)
    state.register_reset_callbacks([lambda: scale_lr(hvd.size())])
    train(state)

What a failure does on gravac:

- A collective that fails because the world failed raises HorovodInternalError on every rank
  (gravac.common.exceptions). run() restores the last commit, resets and, when the reset forms a
  world, runs the reset callbacks, syncs the state from rank 0 and calls the function again:
  training resumes from the commit.
- In an **elastic job** (gravacrun --min-np; GRAVAC_ELASTIC=1 in the environment) the reset asks
  this node's daemon for the job's next membership (gravac._gravac.regroup: the controller
  publishes it once every node of the old one asked or its regroup timeout passed; lost nodes are
  dropped, ranks renumbered densely) and initializes in it: hvd.rank()/size()/local_rank() are
  the new ones, and the job trains on with the smaller world. Below --min-np ranks the reset
  raises GravacError naming the lost nodes and the job ends (docs/ELASTIC.md).
- Outside an elastic job the membership is fixed: when a worker, daemon or node is gone the
  reset raises GravacError naming the failure, on each surviving rank, after its state was
  restored to the last commit; the job ends as it does without elastic.
- HostsUpdatedInterrupt (hosts added or removed) is raised by commit() on every rank when rank 0
  recorded an update: gravacrun --host-discovery-script writes one when a host appears or
  disappears (gravac.common.elastic), or State.on_hosts_updated() is called. run() then resets
  without restoring (the state was just committed): in an elastic job the reset regroups naming
  the nodes the update lists, so the job takes in the new node's workers (which wait in their
  hvd.init() for this membership) and rank 0 broadcasts the state to them; a worker whose node
  is no longer listed leaves (its process exits 0 after closing its connection) and the others
  go on without a rollback (removed only: no state broadcast, as Horovod).
- gravacrun --reset-limit N (Horovod's; GRAVAC_RESET_LIMIT): a worker resets at most N times;
  the next interruption raises RuntimeError (chained to it) and the job ends. Without it a
  function that raises HorovodInternalError on every call while the world stays healthy is
  retried forever (as in Horovod).
- A worker started on a node the job grows onto (gravacrun sets GRAVAC_MEMBERSHIP_VERSION=-1)
  gets its place in hvd.init(), which waits until the running workers regroup; its first
  hvd.elastic.run call then syncs the state from rank 0 like every other rank.
"""

import os

from gravac import _gravac
from gravac._gravac import GravacError
from gravac.common.elastic import HostUpdateResult, ObjectState, State, run_fn
from gravac.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from gravac.torch import mpi_ops
from gravac.torch.elastic.sampler import ElasticSampler
from gravac.torch.elastic.state import TorchState

_ISSUE = ("this job's membership is fixed: it cannot go on with fewer ranks after losing a worker, "
          "daemon or node (start it as an elastic job: gravacrun --min-np; issue 22)")


def run(func):
    """Decorator running ``func(state, ...)`` as Horovod's elastic loop (gravac.common.elastic):
    state synced from rank 0 before each call; on HorovodInternalError the last commit is
    restored and the job reset before calling again; on HostsUpdatedInterrupt the job is reset
    and the function called again from the current state. Collectives must not run before the
    first line of `func` (new ranks sync there). See the module docstring for what a reset can
    and cannot do on gravac's fixed membership."""
    return run_fn(func, _reset)


def _reset(cause=None):
    """Re-initializes gravac.torch for the next try (Horovod's shutdown(); init()).

    On a fixed membership the world after the reset is the one before it; init() reconnects to
    this node's daemon and runs one collective over every rank. When that fails the world is
    gone: raises GravacError (not HorovodInternalError, which would retry forever) naming the
    failure that caused the reset and the missing membership change."""
    if os.environ.get("GRAVAC_ELASTIC") == "1":
        # The old membership's connection is closed (not parked for a re-init as on a fixed
        # world): its session on the daemon ends, and init() joins the new membership's run.
        nodes = getattr(cause, "nodes", None) if isinstance(cause, HostsUpdatedInterrupt) else None
        mpi_ops._close()
        me = os.environ.get("GRAVAC_NODE_NAME", "")
        if nodes and me and me not in nodes:
            print("gravac: node %s was removed from the job by a host update; rank %s leaves"
                  % (me, os.environ.get("GRAVAC_RANK", "?")), flush=True)
            raise SystemExit(0)
        _regroup(nodes)
    else:
        mpi_ops.shutdown()
    try:
        mpi_ops.init()
    except GravacError as e:
        why = str(cause) if cause is not None else "a host update"
        again = "" if str(e) == why else " (re-initializing: %s)" % e
        error = GravacError(
            "elastic reset failed: after '%s' the world of this job cannot be re-formed%s; "
            "%s. This rank's state was restored to its last commit." % (why, again, _ISSUE))
        error.status = getattr(e, "status", "GRAVAC_ERR_UNAVAILABLE")
        error.code = getattr(e, "code", 2)
        raise error from e


def _regroup(expect_nodes=None):
    """Asks this node's daemon for this worker's place in the job's next membership and points
    the GRAVAC_* environment (which init() reads) at it. `expect_nodes`: after a host update, the
    nodes the membership should hold. A worker of a node that joins (GRAVAC_MEMBERSHIP_VERSION
    -1, set by gravacrun) calls it from init() and waits there for the running workers' next
    membership. Raises GravacError (not HorovodInternalError) when the job cannot go on: below
    --min-np, naming the lost nodes."""
    env = os.environ
    first_run = env.setdefault("GRAVAC_FIRST_RUN_ID", env.get("GRAVAC_RUN_ID", ""))
    version = int(env.get("GRAVAC_MEMBERSHIP_VERSION", "0"))
    placement = _gravac.regroup(first_run, version, int(env.get("GRAVAC_MIN_NP", "0")),
                                int(env.get("GRAVAC_MAX_NP", "0")),
                                expect_nodes=",".join(expect_nodes or []))
    env.update({
        "GRAVAC_RUN_ID": placement["run_id"],
        "GRAVAC_MEMBERSHIP_VERSION": str(placement["version"]),
        "GRAVAC_RANK": str(placement["rank"]),
        "GRAVAC_SIZE": str(placement["size"]),
        "GRAVAC_LOCAL_RANK": str(placement["local_rank"]),
        "GRAVAC_LOCAL_SIZE": str(placement["local_size"]),
        "GRAVAC_NODE_RANK": str(placement["node_rank"]),
        "GRAVAC_NODES": str(placement["nodes"]),
    })
    return placement


def membership_version():
    """The version of the membership this worker is in (0 until the first change)."""
    return int(os.environ.get("GRAVAC_MEMBERSHIP_VERSION", "0"))


__all__ = ["ElasticSampler", "HorovodInternalError", "HostUpdateResult", "HostsUpdatedInterrupt",
           "ObjectState", "State", "TorchState", "membership_version", "run"]
