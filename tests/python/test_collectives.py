"""Horovod-style semantics of gravac.torch collectives, run on every rank of a gravacrun job."""

import time

import pytest
import torch

import gravac.torch as hvd

FLOAT_DTYPES = [torch.float32, torch.float64, torch.float16]


def rank_tensor(shape, dtype, offset=0.0):
    """A tensor every rank can predict for every other rank: (rank + 1) * (index + offset)."""
    n = 1
    for d in shape:
        n *= d
    base = torch.arange(n, dtype=torch.float64).reshape(shape) + offset
    return (base * (hvd.rank() + 1)).to(dtype)


def expected_sum(shape, dtype, offset=0.0):
    n = 1
    for d in shape:
        n *= d
    base = torch.arange(n, dtype=torch.float64).reshape(shape) + offset
    factor = hvd.size() * (hvd.size() + 1) / 2
    return base * factor


def tolerance(dtype):
    return {torch.float16: 1e-2, torch.float32: 1e-5, torch.float64: 1e-12}.get(dtype, 0)


def test_world():
    assert hvd.is_initialized()
    assert 0 <= hvd.rank() < hvd.size()
    assert 0 <= hvd.local_rank() < hvd.local_size() <= hvd.size()
    hvd.init()  # idempotent
    ranks = hvd.allgather(torch.tensor([hvd.rank()], dtype=torch.int64))
    assert ranks.tolist() == list(range(hvd.size()))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["sum", "average"])
def test_allreduce_float(dtype, op):
    shape = (3, 5)
    x = rank_tensor(shape, dtype)
    kwargs = {"op": hvd.Sum} if op == "sum" else {"op": hvd.Average}
    y = hvd.allreduce(x, name="ar.%s.%s" % (dtype, op), **kwargs)
    want = expected_sum(shape, dtype)
    if op == "average":
        want = want / hvd.size()
    assert y.dtype == dtype
    assert y.shape == x.shape
    torch.testing.assert_close(y.double(), want, rtol=tolerance(dtype), atol=tolerance(dtype))
    # the input is untouched by the out-of-place allreduce
    torch.testing.assert_close(x, rank_tensor(shape, dtype))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_allreduce_int_sum(dtype):
    x = rank_tensor((7,), dtype)
    y = hvd.allreduce(x, op=hvd.Sum)
    assert y.dtype == dtype
    assert torch.equal(y, expected_sum((7,), dtype).to(dtype))


def test_average_flag_and_default_op():
    x = rank_tensor((4,), torch.float32)
    want = expected_sum((4,), torch.float32)
    torch.testing.assert_close(hvd.allreduce(x).double(), want / hvd.size())  # default Average
    torch.testing.assert_close(hvd.allreduce(x, average=False).double(), want)
    with pytest.raises(ValueError):
        hvd.allreduce(x, average=True, op=hvd.Sum)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_allreduce_in_place(dtype):
    x = rank_tensor((2, 3, 4), dtype, offset=1.0)
    ptr = x.data_ptr()
    out = hvd.allreduce_(x, op=hvd.Sum, name="inplace.%s" % dtype)
    assert out is x
    assert x.data_ptr() == ptr
    torch.testing.assert_close(x.double(), expected_sum((2, 3, 4), dtype, 1.0),
                               rtol=tolerance(dtype), atol=tolerance(dtype))


def test_allreduce_non_contiguous_in_place():
    base = rank_tensor((6, 4), torch.float32)
    view = base.t()  # non-contiguous
    assert not view.is_contiguous()
    hvd.allreduce_(view, op=hvd.Sum)
    torch.testing.assert_close(base.double(), expected_sum((6, 4), torch.float32))


def test_allreduce_non_contiguous_out_of_place():
    x = rank_tensor((6, 4), torch.float64)[:, 1:3]
    y = hvd.allreduce(x, op=hvd.Sum)
    assert y.is_contiguous()
    torch.testing.assert_close(y, expected_sum((6, 4), torch.float64)[:, 1:3])


def test_named_and_unnamed_interleaved():
    a = rank_tensor((5,), torch.float32)
    handles = [hvd.allreduce_async(a, op=hvd.Sum),
               hvd.allreduce_async(a, name="named.one", op=hvd.Sum),
               hvd.allreduce_async(a, op=hvd.Sum),
               hvd.allreduce_async(a * 2, name="named.two", op=hvd.Sum)]
    results = [hvd.synchronize(h) for h in handles]
    want = expected_sum((5,), torch.float32)
    for r, factor in zip(results, [1, 1, 1, 2]):
        torch.testing.assert_close(r.double(), want * factor)


def test_more_unnamed_collectives_than_the_response_cache_holds():
    # Each unnamed call is a new name (allreduce.noname.<n>); the daemons keep the 1024 most
    # recently listed specs and drop the rest in step, so the 1500th call still works, and so
    # does a named tensor listed all along and one listed again after it was dropped.
    want = hvd.size() * (hvd.size() + 1) / 2
    first = hvd.allreduce(torch.tensor([1.0]) * (hvd.rank() + 1), name="kept.early", op=hvd.Sum)
    assert first.item() == want
    for batch in range(30):
        x = torch.tensor([float(hvd.rank() + 1 + batch)])
        handles = [hvd.allreduce_async(x, op=hvd.Sum) for _ in range(50)]
        handles.append(hvd.allreduce_async(x, name="kept.every.batch", op=hvd.Sum))
        for h in handles:
            assert hvd.synchronize(h).item() == want + hvd.size() * batch
    again = hvd.allreduce(torch.tensor([2.0]) * (hvd.rank() + 1), name="kept.early", op=hvd.Sum)
    assert again.item() == 2 * want


def test_async_poll_and_synchronize():
    x = rank_tensor((1000,), torch.float32)
    handle = hvd.allreduce_async_(x, op=hvd.Sum, name="polled")
    deadline = time.monotonic() + 60
    while not hvd.poll(handle):
        assert time.monotonic() < deadline, "allreduce not done after 60 s"
        time.sleep(0.001)
    assert hvd.synchronize(handle) is x
    torch.testing.assert_close(x.double(), expected_sum((1000,), torch.float32))
    with pytest.raises(ValueError):
        hvd.synchronize(handle)  # a handle is synchronized once


def test_scalar_and_empty():
    s = hvd.allreduce(torch.tensor(float(hvd.rank() + 1)), op=hvd.Sum)
    assert s.dim() == 0
    assert s.item() == hvd.size() * (hvd.size() + 1) / 2
    e = hvd.allreduce(torch.zeros(0), op=hvd.Sum, name="empty")
    assert e.shape == (0,)


def test_prescale_postscale():
    x = rank_tensor((8,), torch.float64)
    y = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
    torch.testing.assert_close(y, expected_sum((8,), torch.float64) * 1.5)


def test_allreduce_with_compression_fp16():
    x = rank_tensor((16,), torch.float32)
    y = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y.double(), expected_sum((16,), torch.float32), rtol=1e-2,
                               atol=1e-2)


def test_allreduce_autograd():
    x = rank_tensor((4,), torch.float64).requires_grad_()
    y = hvd.allreduce(x, op=hvd.Sum, name="ar.grad")
    (y * torch.arange(4, dtype=torch.float64)).sum().backward()
    # d/dx_r of sum_r' x_r' . w  summed over ranks again = size * w
    torch.testing.assert_close(x.grad, torch.arange(4, dtype=torch.float64) * hvd.size())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64])
def test_allgather_different_first_dims(dtype):
    r = hvd.rank()
    x = torch.full((r + 1, 3), r + 1).to(dtype)
    y = hvd.allgather(x, name="ag.%s" % dtype)
    total = hvd.size() * (hvd.size() + 1) // 2
    assert y.shape == (total, 3)
    assert y.dtype == dtype
    row = 0
    for src in range(hvd.size()):
        block = y[row:row + src + 1]
        assert torch.equal(block, torch.full((src + 1, 3), src + 1).to(dtype))
        row += src + 1


def test_allgather_zero_rows_on_some_ranks():
    r = hvd.rank()
    x = torch.arange(r % 2 * 2, dtype=torch.float32)  # odd ranks send 2 rows, even ranks none
    y = hvd.allgather(x)
    assert y.numel() == 2 * (hvd.size() // 2)


def test_allgather_autograd():
    x = torch.ones(hvd.rank() + 1, 2, dtype=torch.float64, requires_grad=True)
    y = hvd.allgather(x)
    (y * 3).sum().backward()
    # Horovod's gradient: the average over ranks of the incoming gradient (3 on every rank).
    torch.testing.assert_close(x.grad, torch.full_like(x, 3.0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int32,
                                   torch.uint8])
def test_broadcast(dtype):
    root = hvd.size() - 1
    x = torch.full((3, 2), hvd.rank() + 1).to(dtype)
    y = hvd.broadcast(x, root, name="bc.%s" % dtype)
    assert torch.equal(y, torch.full((3, 2), root + 1).to(dtype))
    assert torch.equal(x, torch.full((3, 2), hvd.rank() + 1).to(dtype))  # untouched
    hvd.broadcast_(x, 0)
    assert torch.equal(x, torch.full((3, 2), 1).to(dtype))


def test_broadcast_parameters_makes_replicas_equal():
    torch.manual_seed(1000 + hvd.rank())  # different initial weights on every rank
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.BatchNorm1d(20),
                                torch.nn.Linear(20, 3))
    model.train()
    model(torch.randn(4, 10))  # moves the BatchNorm running stats, rank-specific
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    flat = torch.cat([t.detach().double().reshape(-1) for t in model.state_dict().values()])
    gathered = hvd.allgather(flat.unsqueeze(0))
    for other in gathered:
        assert torch.equal(other, gathered[0])
    # named_parameters() form
    torch.manual_seed(2000 + hvd.rank())
    for p in model.parameters():
        p.data.normal_()
    hvd.broadcast_parameters(list(model.named_parameters()), root_rank=1)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = hvd.allgather(flat.unsqueeze(0))
    for other in gathered:
        assert torch.equal(other, gathered[0])


def test_broadcast_and_allgather_object():
    obj = {"rank": hvd.rank(), "t": torch.arange(3) * hvd.rank(), "s": "x" * hvd.rank()}
    got = hvd.broadcast_object(obj, root_rank=1)
    assert got["rank"] == 1 and got["s"] == "x"
    assert torch.equal(got["t"], torch.arange(3))
    everyone = hvd.allgather_object(hvd.rank() * 10)
    assert everyone == [r * 10 for r in range(hvd.size())]


def test_broadcast_optimizer_state():
    torch.manual_seed(7)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (hvd.rank() + 1))
    model(torch.randn(3, 4) * (hvd.rank() + 1)).sum().backward()
    opt.step()  # rank-specific Adam moments
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    state = opt.state_dict()
    assert state["param_groups"][0]["lr"] == pytest.approx(0.01)
    moments = torch.cat([s["exp_avg"].reshape(-1) for s in state["state"].values()])
    gathered = hvd.allgather(moments.unsqueeze(0))
    for other in gathered:
        assert torch.equal(other, gathered[0])


def test_unsupported_dtype_is_a_local_error():
    with pytest.raises(ValueError, match="dtype"):
        hvd.allreduce(torch.zeros(3, dtype=torch.complex64))
    with pytest.raises(ValueError, match="bool tensors reduce with Min"):
        hvd.allreduce(torch.zeros(3, dtype=torch.bool))
