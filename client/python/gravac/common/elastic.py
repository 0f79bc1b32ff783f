"""Horovod's elastic training loop and state objects (``horovod.common.elastic``), framework-free.

A training function decorated with ``run`` (gravac.torch.elastic.run) takes a State as its first
argument. The State holds what must survive a failure (model, optimizer, epoch, ...); ``commit()``
copies it to host memory, ``restore()`` brings back the last commit, ``sync()`` makes every rank
hold rank 0's. The loop:

    sync the state from rank 0 (unless the last interrupt said it is already in sync)
    call the function; return its result when it returns
    on HorovodInternalError (a collective failed: the world broke): restore the last commit
    on HostsUpdatedInterrupt (hosts added or removed, raised by commit()): keep the state
    reset the framework (shut down and re-initialize), call the reset callbacks, and loop.

Host updates arrive through ``State.on_hosts_updated(timestamp, result)``; ``check_host_updates()``
(called by ``commit()``) broadcasts rank 0's view so every rank raises HostsUpdatedInterrupt at the
same commit.

Under gravacrun --host-discovery-script, gravacrun writes each host update to the file named by
GRAVAC_HOSTS_UPDATE_FILE (lines "serial N", "nodes a,b,...", "added ...", "removed ..."; atomic
replacement); rank 0 reads it at every check_host_updates() (one small read) and records an update
whose serial is newer than the last one seen, with the node set the job should now have, so the
interrupt carries it (HostsUpdatedInterrupt.nodes) to the reset (gravac.torch.elastic): the
regroup names those nodes, and a worker whose node is no longer among them leaves.

Without an elastic job (gravacrun --min-np) the membership is fixed: after a HorovodInternalError
the reset can only re-form the same world. When the failure was transient the loop resumes from
the last commit; when a worker, daemon or node is gone the reset raises a GravacError saying so,
and the job ends (see gravac.torch.elastic).
"""

import copy
import enum
import functools
import os
import queue

from gravac.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt


class HostUpdateResult(enum.IntFlag):
    """What a host update did (Horovod's flags): removed-only updates need no state sync."""
    no_update = 0
    removed = 1
    added = 2
    mixed = removed | added


class State:
    """Training state kept in sync across ranks and rolled back after failures.

    Args:
        bcast_object: broadcasts a picklable object from rank 0 (returns rank 0's value).
        get_rank: returns this worker's rank.
    Subclasses implement save(), restore() and sync().
    """

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._host_messages = queue.Queue()
        self._last_updated_timestamp = 0
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Adds functions called (in order, without arguments) after every reset, e.g. to scale
        the learning rate to the new hvd.size()."""
        for callback in callbacks:
            if not callable(callback):
                raise ValueError("reset callback %r is not callable" % (callback,))
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        """Called by the elastic loop after a reset: drops stale host messages, runs callbacks."""
        self._host_messages = queue.Queue()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res=HostUpdateResult.mixed, nodes=None):
        """Records a host update (its timestamp and HostUpdateResult; gravac: the node names the
        job should now hold, if known); the next commit() or check_host_updates() raises
        HostsUpdatedInterrupt on every rank when rank 0 saw one."""
        self._host_messages.put((timestamp, HostUpdateResult(update_res), nodes))

    def commit(self):
        """Saves the state to host memory as the point to restore after a failure, then checks
        for host updates (which raise HostsUpdatedInterrupt). A collective: every rank commits
        at the same point. Commit less often than every batch when the state is large: a
        failure loses the steps since the last commit."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank when rank 0 recorded a host update newer
        than the last one seen. A collective (one broadcast from rank 0)."""
        prev = self._last_updated_timestamp
        if self._rank() == 0:
            self._read_hosts_update_file(prev)
        latest, update, nodes = prev, HostUpdateResult.no_update, None
        while not self._host_messages.empty():
            timestamp, result, names = self._host_messages.get()
            if timestamp > latest:
                latest = timestamp
                update |= result
                nodes = names
        # Rank 0's view decides, so that all ranks raise at the same commit.
        prev, latest, update, nodes = self._bcast_object((prev, latest, int(update), nodes))
        self._last_updated_timestamp = latest
        if latest > prev:
            raise HostsUpdatedInterrupt(HostUpdateResult(update) == HostUpdateResult.removed,
                                        nodes=nodes)

    def _read_hosts_update_file(self, seen):
        """Records gravacrun's host update (GRAVAC_HOSTS_UPDATE_FILE) when its serial is newer
        than `seen`. A missing or partial file is no update (gravacrun replaces it atomically)."""
        path = os.environ.get("GRAVAC_HOSTS_UPDATE_FILE")
        if not path:
            return
        try:
            with open(path) as f:
                fields = dict(line.split(" ", 1) for line in f.read().splitlines() if " " in line)
            serial = int(fields["serial"])
        except (OSError, ValueError, KeyError):
            return
        if serial <= seen:
            return
        names = lambda key: [n for n in fields.get(key, "").strip().split(",") if n]
        nodes = names("nodes")
        result = HostUpdateResult.no_update
        if names("added"):
            result |= HostUpdateResult.added
        if names("removed"):
            result |= HostUpdateResult.removed
        if serial > seen + 1 or result == HostUpdateResult.no_update:
            result = HostUpdateResult.mixed  # updates were missed: sync to be safe
        self.on_hosts_updated(serial, result, nodes or None)

    def save(self):
        """Saves the state to host memory."""
        raise NotImplementedError()

    def restore(self):
        """Restores the last saved state, undoing later changes."""
        raise NotImplementedError()

    def sync(self):
        """Makes every rank hold rank 0's state."""
        raise NotImplementedError()


class ObjectState(State):
    """State made of plain Python objects, given as keyword arguments and exposed as attributes
    (``state.epoch``). save() keeps their current values, restore() sets the saved ones back,
    sync() broadcasts rank 0's saved values. The values must be picklable (torch.save)."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = copy.deepcopy(kwargs)
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {name: copy.deepcopy(getattr(self, name))
                             for name in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, copy.deepcopy(value))


def reset_limit():
    """Horovod's --reset-limit (gravacrun --reset-limit sets GRAVAC_RESET_LIMIT): how many
    resets one worker may go through before the elastic loop gives up; None = no limit."""
    text = os.environ.get("GRAVAC_RESET_LIMIT", "")
    try:
        limit = int(text) if text else 0
    except ValueError:
        raise ValueError("GRAVAC_RESET_LIMIT must be a whole number >= 0, got %r" % text)
    return limit if limit > 0 else None


def run_fn(func, reset):
    """The elastic loop around `func(state, *args, **kwargs)` (see the module docstring).
    `reset` re-initializes the framework; an error it raises ends the loop. With a reset limit
    (reset_limit()), the reset past it raises RuntimeError instead (from the interruption), so
    the worker fails and the job ends, as Horovod's driver ends it."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not isinstance(state, State):
            raise ValueError("the first argument of an elastic function must be a "
                             "gravac elastic State, not %s" % type(state).__name__)
        skip_sync = False
        resets = 0
        limit = reset_limit()
        while True:
            if not skip_sync:
                state.sync()
            try:
                return func(state, *args, **kwargs)
            except HorovodInternalError as e:
                state.restore()
                skip_sync = False
                cause = e
            except HostsUpdatedInterrupt as e:
                skip_sync = e.skip_sync
                cause = e
            if limit is not None and resets >= limit:
                raise RuntimeError(
                    "elastic: this worker was reset %d times, the reset limit (--reset-limit "
                    "%d); not again after '%s'" % (resets, limit, cause)) from cause
            resets += 1
            reset(cause)
            state.on_reset()

    return wrapper


__all__ = ["HostUpdateResult", "ObjectState", "State", "run_fn"]
