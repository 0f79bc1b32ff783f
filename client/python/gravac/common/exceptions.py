"""The exceptions of Horovod's ``horovod.common.exceptions``, as Horovod scripts import them
(``from gravac.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt``).

HorovodInternalError: a collective failed because the job's world failed, not because of its
arguments: a worker, daemon or peer node was lost (GRAVAC_ERR_UNAVAILABLE), an operation ran past
its time bound (GRAVAC_ERR_TIMEOUT) or the connection was shut down under it
(GRAVAC_ERR_SHUTDOWN). It is a subclass of GravacError (``except GravacError`` still catches
every gravac failure) raised by the extension itself. Unlike Horovod, errors in the call's own
arguments (ranks disagreeing on a tensor's shape, dtype, name ...: GRAVAC_ERR_MISMATCH,
GRAVAC_ERR_INVALID) stay plain GravacError: restoring and retrying cannot fix them, so the
elastic loop lets them end the job instead of retrying them forever.

HostsUpdatedInterrupt: raised by State.commit() / check_host_updates() on every rank at once
when hosts were added or removed; the elastic loop then resets without restoring.

JobRefusedError (gravac-only): the worker's daemon or the controller refused its job
(GRAVAC_ERR_REFUSED: a job the daemon does not serve, no free worker slots, a run id that already
ended, an exhausted data-port range); a GravacError, not retried by the elastic loop.
"""

from gravac._gravac import GravacError, HorovodInternalError, JobRefusedError


class HostsUpdatedInterrupt(RuntimeError):
    """Hosts were added or removed: the elastic loop resets and re-runs the training function
    from the current (just committed) state.

    ``skip_sync`` is True when hosts were only removed: every remaining rank already holds the
    same committed state, so the loop skips the state broadcast after the reset (as Horovod).
    """

    def __init__(self, skip_sync=False, nodes=None):
        super().__init__("hosts were updated" + (" (removed only)" if skip_sync else ""))
        self.skip_sync = skip_sync
        # gravac: the nodes the next membership should hold (gravacrun --host-discovery-script),
        # or None when the update did not name them.
        self.nodes = nodes


__all__ = ["GravacError", "HorovodInternalError", "HostsUpdatedInterrupt", "JobRefusedError"]
