"""hvd.join (issue 21): ranks with uneven data, Horovod's results, on every rank of a job.

Horovod's rule: a rank that joined contributes zeros to the allreduces the other ranks still
post, Average still divides by size(), and join() returns the rank that joined last. Every
expected value below follows from the rank and size alone.
"""

import pytest
import torch

import gravac.torch as hvd


def _steps_then_join(steps_of, prefix):
    """Rank r runs steps_of(r) steps of three allreduces (fused in the daemon), then joins.

    Returns (results per step, join's return value)."""
    r = hvd.rank()
    results = []
    for k in range(steps_of(r)):
        a = torch.full((5,), float(r + 1), dtype=torch.float64)
        b = torch.arange(17, dtype=torch.float32).reshape(1, 17) * (r + 1)
        c = torch.tensor([r + 1, -(r + 1), 7 * (r + 1)], dtype=torch.int32)
        ha = hvd.allreduce_async(a, name=prefix + ".a", op=hvd.Average)
        hb = hvd.allreduce_async(b, name=prefix + ".b", op=hvd.Sum)
        hc = hvd.allreduce_async(c, name=prefix + ".c", op=hvd.Sum)
        results.append((hvd.synchronize(ha), hvd.synchronize(hb), hvd.synchronize(hc)))
    return results, hvd.join()


def _check(results, active_at, prefix):
    n = hvd.size()
    for k, (a, b, c) in enumerate(results):
        s = sum(q + 1 for q in active_at(k))  # the joined ranks add zeros
        assert torch.equal(a, torch.full((5,), s / n, dtype=torch.float64)), (prefix, k, a, s)
        want_b = torch.arange(17, dtype=torch.float32).reshape(1, 17) * s
        assert torch.equal(b, want_b), (prefix, k, b, s)
        assert c.tolist() == [s, -s, 7 * s], (prefix, k, c, s)


def test_join_fewer_steps_on_lower_ranks():
    # Rank r has r + 1 steps: at step k ranks k..n-1 post; rank n-1 joins last.
    n = hvd.size()
    results, last = _steps_then_join(lambda r: r + 1, "join.up")
    assert len(results) == hvd.rank() + 1
    _check(results, lambda k: range(k, n), "join.up")
    assert last == n - 1


def test_join_again_fewer_steps_on_higher_ranks():
    # A second join in the same job: rank r has n - r steps; rank 0 joins last.
    n = hvd.size()
    results, last = _steps_then_join(lambda r: n - r, "join.down")
    assert len(results) == n - hvd.rank()
    _check(results, lambda k: range(0, n - k), "join.down")
    assert last == 0


def test_join_with_every_rank_at_once_and_allreduce_after():
    n = hvd.size()
    x = torch.full((3,), float(hvd.rank()), dtype=torch.float64)
    hvd.allreduce(x, name="join.before", op=hvd.Sum)
    last = hvd.join()
    assert 0 <= last < n
    assert hvd.allgather_object(last) == [last] * n  # one answer on every rank
    y = hvd.allreduce(x, name="join.after", op=hvd.Sum)
    assert torch.equal(y, torch.full((3,), float(n * (n - 1) // 2), dtype=torch.float64))


def test_join_bad_input_names_the_joined_rank_and_tensor():
    # Rank 0 joins at once; the others post a name rank 0 never posted, then an allgather and
    # a broadcast: each fails on the posting ranks naming rank 0 and the tensor, then they join.
    r, n = hvd.rank(), hvd.size()
    if n == 1:
        assert hvd.join() == 0
        return
    if r == 0:
        last = hvd.join()
    else:
        x = torch.ones(4)
        with pytest.raises(hvd.GravacError) as info:
            hvd.allreduce(x, name="join.unknown.to.rank0", op=hvd.Sum)
        message = str(info.value)
        assert "join.unknown.to.rank0" in message and "ranks [0]" in message, message
        assert "never posted it" in message, message
        with pytest.raises(hvd.GravacError) as info:
            hvd.allgather(x, name="join.gather.while.joined")
        message = str(info.value)
        assert "join.gather.while.joined" in message and "allgather" in message, message
        assert "have joined" in message, message
        with pytest.raises(hvd.GravacError) as info:
            hvd.broadcast(x, root_rank=1, name="join.bcast.while.joined")
        assert "broadcast" in str(info.value) and "have joined" in str(info.value)
        last = hvd.join()
    assert 1 <= last < n
    assert hvd.allgather_object(last) == [last] * n
    # The job goes on normally afterwards.
    y = hvd.allreduce(torch.full((2,), 1.0), name="join.bad.after", op=hvd.Sum)
    assert torch.equal(y, torch.full((2,), float(n)))
