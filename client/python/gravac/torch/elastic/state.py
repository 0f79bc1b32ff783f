"""TorchState (Horovod's ``horovod.torch.elastic.TorchState``): the elastic State of a PyTorch
training process. Models, optimizers, LR schedulers and ElasticSamplers given as keyword arguments
are handled by type (their state_dict is deep-copied on commit, loaded back on restore, and
broadcast from rank 0 on sync); every other keyword argument is a plain object (ObjectState)."""

import copy

import torch

from gravac.common.elastic import ObjectState
from gravac.torch import functions, mpi_ops
from gravac.torch.elastic.sampler import ElasticSampler

_LRScheduler = getattr(torch.optim.lr_scheduler, "LRScheduler",
                       getattr(torch.optim.lr_scheduler, "_LRScheduler", None))


class _Handler:
    """Commit/restore/sync of one object through its state_dict."""

    def __init__(self, name, value):
        self.name = name
        self.value = value
        self.save()

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(copy.deepcopy(self._saved))

    def sync(self):
        self.value.load_state_dict(functions.broadcast_object(
            self.value.state_dict(), 0, name="elastic.%s" % self.name))

    def set_value(self, value):
        """A new object assigned to the attribute: it becomes the committed state."""
        self.value = value
        self.save()


class _ModelHandler(_Handler):
    def sync(self):
        # Parameters and buffers in place (the optimizer keeps referring to the same tensors).
        functions.broadcast_parameters(self.value.state_dict(), root_rank=0,
                                       prefix="elastic.%s." % self.name)


class _OptimizerHandler(_Handler):
    def sync(self):
        functions.broadcast_optimizer_state(self.value, root_rank=0,
                                            name="elastic.%s" % self.name)


def _handler_for(name, value):
    if isinstance(value, torch.nn.Module):
        return _ModelHandler(name, value)
    if isinstance(value, torch.optim.Optimizer):
        return _OptimizerHandler(name, value)
    if isinstance(value, ElasticSampler) or (_LRScheduler is not None
                                             and isinstance(value, _LRScheduler)):
        return _Handler(name, value)
    return None


def _sync_train_step():
    """Makes every rank continue from the same training step, the largest: gravacd matches each
    gradient's step across ranks, and a failure can leave the ranks a step apart (one failed in
    step(), which counts the step, another in a broadcast)."""
    step = torch.tensor([mpi_ops._state.train_step], dtype=torch.int64)
    mpi_ops._state.train_step = int(mpi_ops.allreduce(step, op=mpi_ops.Max,
                                                      name="elastic.train_step").item())


class TorchState(ObjectState):
    """State of a PyTorch training process: ``TorchState(model, optimizer, epoch=0, batch=0,
    train_sampler=sampler, ...)``; every argument is an attribute (``state.model``,
    ``state.epoch``). Assigning a new model/optimizer/... to an attribute makes it the committed
    one.

    commit() saves all of them in host memory (deep copies: model parameters, optimizer moments,
    sampler position, plain values) and checks for host updates; restore() loads the last commit
    back into the same objects; sync() broadcasts rank 0's to every rank (models in place with
    broadcast_parameters, optimizers with broadcast_optimizer_state, the rest as objects) and
    sets the training step gradients carry to the largest of the ranks'.
    """

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers, plain = {}, {}
        for name, value in kwargs.items():
            handler = _handler_for(name, value)
            if handler is not None:
                handlers[name] = handler
            else:
                plain[name] = value
        object.__setattr__(self, "_handlers", handlers)
        for name, handler in handlers.items():
            object.__setattr__(self, name, handler.value)
        super().__init__(bcast_object=self._broadcast, get_rank=mpi_ops.rank, **plain)

    @staticmethod
    def _broadcast(obj):
        return functions.broadcast_object(obj, 0, name="elastic.objects")

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        _sync_train_step()
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def on_reset(self):
        """After a reset: ElasticSamplers re-read the rank and world size (also when the loop
        skips the sync), then the reset callbacks run."""
        for handler in self._handlers.values():
            if isinstance(handler.value, ElasticSampler):
                handler.value.reset()
        super().on_reset()

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers and hasattr(self, name):
            handlers[name].set_value(value)
        super().__setattr__(name, value)
