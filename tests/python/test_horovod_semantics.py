"""Results that must equal Horovod's exactly (issue 21's wrong results), on every rank of a job.

Each test computes Horovod's expected values from the rank and size alone, so a rank that got a
different answer fails with both in the message.
"""

import pytest
import torch

import gravac.torch as hvd


def test_allgather_backward_averages_over_ranks():
    # Rank r contributes r + 1 rows; the loss weights the gathered rows with w_r = (r + 1) * base,
    # so Horovod's gradient (the average of the incoming gradients) is base * (size + 1) / 2.
    r, n = hvd.rank(), hvd.size()
    x = torch.full((r + 1, 2), float(r), dtype=torch.float64, requires_grad=True)
    y = hvd.allgather(x, name="sem.allgather.grad")
    rows = n * (n + 1) // 2
    assert y.shape == (rows, 2)
    base = torch.arange(rows * 2, dtype=torch.float64).reshape(rows, 2)
    (y * base * (r + 1)).sum().backward()
    offset = r * (r + 1) // 2
    want = base[offset:offset + r + 1] * (n + 1) / 2
    assert torch.equal(x.grad, want), (x.grad, want)


def test_broadcast_backward_averages_on_root_and_is_zero_elsewhere():
    r, n = hvd.rank(), hvd.size()
    root = n - 1
    x = torch.arange(4, dtype=torch.float64).requires_grad_()
    y = hvd.broadcast(x * (r + 1), root_rank=root, name="sem.broadcast.grad")
    assert torch.equal(y.detach(), torch.arange(4, dtype=torch.float64) * n)
    (y * (r + 1)).sum().backward()
    # d(x * (r + 1))/dx = r + 1 times the gradient broadcast hands back.
    if r == root:
        want = torch.full((4,), (n + 1) / 2 * (r + 1), dtype=torch.float64)
    else:
        want = torch.zeros(4, dtype=torch.float64)
    assert torch.equal(x.grad, want), (x.grad, want)


def _trunc(v):
    return int(v)  # toward zero, as a float64 -> integer cast


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_allreduce_prescale_keeps_dtype(dtype):
    r, n = hvd.rank(), hvd.size()
    values = [1, 2, 3, -7, 100]
    x = torch.tensor([v * (r + 1) for v in values], dtype=dtype)
    y = hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.5, name="sem.int.pre.%s" % dtype)
    want = [sum(_trunc(v * (k + 1) * 2.5) for k in range(n)) for v in values]
    assert y.dtype == dtype
    assert y.tolist() == want


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer_allreduce_postscale_keeps_dtype(dtype):
    r, n = hvd.rank(), hvd.size()
    values = [1, 2, 3, -7, 100]
    x = torch.tensor([v * (r + 1) for v in values], dtype=dtype)
    y = hvd.allreduce(x, op=hvd.Sum, postscale_factor=0.5, name="sem.int.post.%s" % dtype)
    want = [_trunc(sum(v * (k + 1) for k in range(n)) * 0.5) for v in values]
    assert y.dtype == dtype
    assert y.tolist() == want
    # In place, both factors at once.
    hvd.allreduce_(x, op=hvd.Sum, prescale_factor=3.0, postscale_factor=0.25,
                   name="sem.int.inplace.%s" % dtype)
    want = [_trunc(sum(v * (k + 1) * 3 for k in range(n)) * 0.25) for v in values]
    assert x.dtype == dtype
    assert x.tolist() == want


def test_second_async_call_under_a_name_in_flight_raises_at_once():
    r, n = hvd.rank(), hvd.size()
    x = torch.full((3,), float(r + 1))
    handle = hvd.allreduce_async(x, name="sem.duplicate", op=hvd.Sum)
    with pytest.raises(ValueError, match="sem.duplicate"):
        hvd.allreduce_async(x, name="sem.duplicate", op=hvd.Sum)
    with pytest.raises(ValueError, match="sem.duplicate"):
        hvd.broadcast_async(x, 0, name="sem.duplicate")
    assert hvd.synchronize(handle).tolist() == [n * (n + 1) / 2] * 3
    # Once synchronized the name is free again.
    assert hvd.allreduce(x, name="sem.duplicate", op=hvd.Sum).tolist() == [n * (n + 1) / 2] * 3


def test_init_shutdown_init():
    r, n = hvd.rank(), hvd.size()
    hvd.shutdown()
    assert not hvd.is_initialized()
    with pytest.raises(ValueError, match="not been initialized"):
        hvd.rank()
    hvd.shutdown()  # idempotent
    hvd.init()
    assert hvd.is_initialized()
    assert (hvd.rank(), hvd.size()) == (r, n)
    y = hvd.allreduce(torch.tensor([float(r)]), name="sem.after_reinit", op=hvd.Sum)
    assert y.tolist() == [n * (n - 1) / 2]


def _model():
    torch.manual_seed(7)
    return torch.nn.Linear(3, 2)


def test_broadcast_optimizer_state_creates_state_on_fresh_ranks():
    r = hvd.rank()
    root = 0
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    if r == root:  # the root has taken a step with gradients of ones: momentum buffers are ones
        for p in model.parameters():
            p.grad = torch.ones_like(p)
        opt.step()
    hvd.broadcast_optimizer_state(opt, root_rank=root, name="sem.opt_state")
    for p in model.parameters():
        assert p.grad is not None
        if r != root:
            assert torch.equal(p.grad, torch.zeros_like(p))
        assert torch.equal(opt.state[p]["momentum_buffer"], torch.ones_like(p))


def test_broadcast_optimizer_state_of_fresh_distributed_optimizers():
    model = _model()
    before = [p.detach().clone() for p in model.parameters()]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(opt, root_rank=0, name="sem.opt_state.dist")
    for p, p0 in zip(model.parameters(), before):
        assert torch.equal(p.grad, torch.zeros_like(p))
        assert torch.equal(opt.state[p]["momentum_buffer"], torch.zeros_like(p))
        assert torch.equal(p.detach(), p0)  # a zero-gradient step without weight decay
    # The gradients are exchanged normally afterwards.
    opt.zero_grad()
    model(torch.full((1, 3), float(hvd.rank()))).sum().backward()
    opt.step()
    n = hvd.size()
    assert torch.allclose(model.bias.grad, torch.ones(2))
    assert torch.allclose(model.weight.grad, torch.full((2, 3), (n - 1) / 2))
