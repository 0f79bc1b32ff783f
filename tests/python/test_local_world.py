"""A world of one: every call of gravac.torch on one rank, with exact results.

Run by CTest without any launcher (``python train.py``: no daemon, gravac.torch._local).
Compression keeps the daemon's top-k step with error feedback at the compressor's θ_min, as a
multi-rank job's warm-up does. (A gravacrun job of size 1 sends its gradients dense: the daemon
has no one to send them to.)
"""

import os

import pytest
import torch

import gravac.torch as hvd


def test_world_of_one():
    assert hvd.is_initialized()
    assert (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()) == (0, 1, 0, 1)


def test_collectives_return_their_input():
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert torch.equal(hvd.allreduce(x, op=hvd.Sum, name="local.sum"), x)
    assert torch.equal(hvd.allreduce(x, name="local.avg"), x)
    assert torch.equal(hvd.allgather(x, name="local.gather"), x)
    assert torch.equal(hvd.broadcast(x, 0, name="local.bcast"), x)
    y = x.clone()
    hvd.allreduce_(y, op=hvd.Sum, prescale_factor=2.0, name="local.inplace")
    assert torch.equal(y, x * 2)
    ints = torch.tensor([3, -7, 5], dtype=torch.int64)
    assert hvd.allreduce(ints, op=hvd.Sum, postscale_factor=0.5, name="local.int").tolist() == [
        1, -3, 2]
    handle = hvd.allreduce_async(x, name="local.async", op=hvd.Sum)
    assert hvd.poll(handle)
    assert torch.equal(hvd.synchronize(handle), x)
    hvd.barrier()
    assert hvd.broadcast_object({"a": 1}, 0) == {"a": 1}
    assert hvd.allgather_object([2]) == [[2]]


def test_broadcast_from_a_rank_outside_the_world_fails():
    with pytest.raises(hvd.GravacError, match="root rank 1"):
        hvd.broadcast(torch.zeros(2), 1, name="local.bad_root")


def test_autograd_through_collectives():
    x = torch.arange(3, dtype=torch.float64).requires_grad_()
    (hvd.allgather(x, name="local.ag.grad") * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0, 2.0]


def test_compression_keeps_error_feedback():
    # θ = 4 on 8 elements keeps k = 2 values per step; what is not sent stays in the residual.
    w = torch.nn.Parameter(torch.zeros(8))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([w], lr=1.0),
                                   named_parameters=[("w", w)],
                                   compression=hvd.Compression.topk(4))
    g = torch.tensor([8.0, 1.0, 7.0, 2.0, 6.0, 3.0, 5.0, 4.0])
    sent = []
    for _ in range(2):
        opt.zero_grad()
        (w * g).sum().backward()
        opt.step()
        sent.append(w.grad.tolist())
    assert sent[0] == [8.0, 0, 7.0, 0, 0, 0, 0, 0]
    # Step 2 sends the top 2 of g + e = [8, 2, 7, 4, 12, 6, 10, 8].
    assert sent[1] == [0, 0, 0, 0, 12.0, 0, 10.0, 0]
    assert w.detach().tolist() == [-8.0, 0, -7.0, 0, -12.0, 0, -10.0, 0]
    assert opt.last_step_info["theta"] == 4.0


def test_no_daemon_without_a_launcher():
    assert "GRAVAC_DAEMON_SOCKET" not in os.environ
    from gravac.torch import _local
    assert isinstance(hvd.mpi_ops._state.ctx(), _local.LocalContext)
