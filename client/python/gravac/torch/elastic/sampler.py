"""ElasticSampler (Horovod's ``horovod.torch.elastic.ElasticSampler``): deals a dataset out to the
ranks like torch's DistributedSampler and, kept in a TorchState, resumes an interrupted epoch
where its last commit left it instead of repeating the samples already trained on."""

import math
import random

import torch.utils.data

from gravac.torch import mpi_ops


class ElasticSampler(torch.utils.data.Sampler):
    """Indices of this rank's share of the samples of the current epoch not yet processed.

    Every epoch orders all indices (shuffled with ``seed + epoch`` when ``shuffle``, the same order
    on every rank), drops the first ``processed_num`` (the samples the whole job has processed this
    epoch, counted by record_batch), pads the rest to a multiple of the world size by repeating
    its head, and gives rank r every size()-th index from position r.

    Use, as in Horovod: put the sampler in the TorchState, call ``record_batch(batch_idx,
    batch_size)`` after each batch (batch_size: this rank's samples), and ``set_epoch(epoch + 1)``
    at the END of each epoch (it clears the processed count; calling it at the start of an epoch
    would throw away the position a restore brings back). After ``state.restore()`` the sampler
    holds the committed count, so the next iteration starts after the committed batches.
    The rank and world size are read (from gravac.torch) at construction, set_epoch and
    load_state_dict: call ``reset()`` after the world changed.
    """

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch` (call it at the end of the previous one): new order, nothing
        processed."""
        self.epoch = int(epoch)
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Counts one processed batch of `batch_size` samples on every rank (the job processed
        batch_size * size() samples). `batch_idx` is accepted for Horovod's signature."""
        del batch_idx
        if int(batch_size) < 0:
            raise ValueError("record_batch: batch_size must be >= 0, got %r" % (batch_size,))
        self.processed_num += int(batch_size) * self.num_replicas

    def state_dict(self):
        return {"epoch": self.epoch, "processed_num": self.processed_num}

    def load_state_dict(self, state_dict):
        self.epoch = int(state_dict["epoch"])
        self.processed_num = int(state_dict["processed_num"])
        self.reset()

    def reset(self):
        """Recomputes this rank's share from the current rank, world size, epoch and count."""
        self.num_replicas = mpi_ops.size()
        self.rank = mpi_ops.rank()
        indices = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(indices)
        self.remaining_indices = indices[self.processed_num:]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        indices = list(self.remaining_indices)
        padding = self.total_size - len(indices)
        while padding > 0:  # repeat the head (several times when fewer indices than ranks)
            indices += indices[:padding]
            padding = self.total_size - len(indices)
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples
