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

What a failure does on gravac's membership today (fixed: issue 22 adds membership changes):

- A collective that fails because the world failed raises HorovodInternalError on every rank
  (gravac.common.exceptions). run() restores the last commit, resets (hvd.shutdown(); hvd.init())
  and, when the reset re-forms the world, runs the reset callbacks, syncs the state from rank 0
  and calls the function again: training resumes from the commit.
- When a worker, daemon or node is gone, the world cannot be re-formed: the membership is fixed,
  so the job cannot go on with fewer ranks (nor grow). The reset then raises GravacError naming
  the failure and issue 22, on each surviving rank, after its state was restored to the last
  commit; the job ends as it does without elastic.
- HostsUpdatedInterrupt (hosts added or removed) is raised by commit() when rank 0 recorded an
  update with State.on_hosts_updated(); gravac's controller does not publish any yet, so only a
  caller of on_hosts_updated triggers it. run() then resets without restoring.
- There is no gravacrun --min-np / --max-np / --host-discovery-script yet, and no reset limit:
  a function that raises HorovodInternalError on every call while the world stays healthy is
  retried forever (as in Horovod without --reset-limit).
"""

from gravac._gravac import GravacError
from gravac.common.elastic import HostUpdateResult, ObjectState, State, run_fn
from gravac.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from gravac.torch import mpi_ops
from gravac.torch.elastic.sampler import ElasticSampler
from gravac.torch.elastic.state import TorchState

_ISSUE = ("gravac's job membership is fixed: a job cannot yet go on with fewer ranks after losing "
          "a worker, daemon or node, nor grow (elastic membership changes: issue 22)")


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


__all__ = ["ElasticSampler", "HorovodInternalError", "HostUpdateResult", "HostsUpdatedInterrupt",
           "ObjectState", "State", "TorchState", "run"]
