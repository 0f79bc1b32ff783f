"""Errors across ranks surface as GravacError on every rank, with the daemon's message."""

import time

import pytest
import torch

import gravac
import gravac.torch as hvd


def test_mismatched_shapes_raise_on_every_rank():
    x = torch.ones(hvd.rank() + 1)
    start = time.monotonic()
    with pytest.raises(hvd.GravacError) as info:
        hvd.allreduce(x, name="mismatched.shape")
    assert time.monotonic() - start < 10.0
    message = str(info.value)
    assert "mismatched.shape" in message
    assert "shape" in message.replace("mismatched.shape", "")
    assert info.value.status.startswith("GRAVAC_ERR_")
    assert isinstance(info.value, gravac.GravacError)
    # An argument error, not a failed world: not Horovod's retried HorovodInternalError.
    assert issubclass(hvd.HorovodInternalError, hvd.GravacError)
    assert not isinstance(info.value, hvd.HorovodInternalError)


def test_mismatched_dtypes_raise_on_every_rank():
    dtype = torch.float32 if hvd.rank() % 2 == 0 else torch.float64
    with pytest.raises(hvd.GravacError) as info:
        hvd.allreduce(torch.ones(4, dtype=dtype), name="mismatched.dtype")
    assert "mismatched.dtype" in str(info.value)
    assert "dtype" in str(info.value).replace("mismatched.dtype", "")


def test_mismatched_allgather_rows_raise_on_every_rank():
    x = torch.ones(2, hvd.rank() + 1)
    with pytest.raises(hvd.GravacError) as info:
        hvd.allgather(x, name="mismatched.rows")
    assert "mismatched.rows" in str(info.value)


def test_mismatched_optimizer_gradients_raise_on_every_rank():
    model = torch.nn.Linear(3 + hvd.rank(), 1)  # gradient shapes differ across ranks
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    model(torch.ones(2, 3 + hvd.rank())).sum().backward()
    with pytest.raises(hvd.GravacError) as info:
        opt.step()
    assert "grad.weight" in str(info.value)
