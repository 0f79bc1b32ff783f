"""Horovod's process sets (issue 21): collectives on subsets of the ranks, on every rank of a job.

Only the ranks of a set post its collectives and they complete when those ranks did: gravacd
waits for the set's local ranks, negotiates among the nodes holding its ranks and runs the
exchange on their sub-communicator. Every expected value follows from the ranks alone. CMake
runs this file at 1 rank without a launcher, 2 ranks on one node, 2 over two nodes and 4 over
two nodes (ranks 0-1 on node 0, 2-3 on node 1).
"""

import pytest
import torch

import gravac.torch as hvd
from gravac import _gravac
from gravac.torch import mpi_ops


def _candidate_sets(n):
    """Distinct sets for a job of n ranks: the even ranks (one per node at 4 ranks), the lower
    half (one node at 4 ranks), the last rank alone, the first and last (the even ranks' nodes)."""
    sets = []
    for ranks in (list(range(0, n, 2)), list(range((n + 1) // 2)), [n - 1], sorted({0, n - 1})):
        if ranks not in sets:
            sets.append(ranks)
    return sets


def _value(r):
    return float(r + 1)


def _check_set(ps, tag):
    """Every collective on `ps` with exact expected values (members only)."""
    r, ranks = hvd.rank(), ps.ranks
    k = len(ranks)
    assert ps.included() and ps.size() == k and ps.rank() == ranks.index(r)
    total = sum(_value(q) for q in ranks)
    # Posted together, with a global allreduce in between, before any is waited on.
    h_sum = hvd.allreduce_async(torch.full((7,), _value(r)), name=tag + ".sum", op=hvd.Sum,
                                process_set=ps)
    h_avg = hvd.allreduce_async(torch.full((3,), _value(r), dtype=torch.float64),
                                name=tag + ".avg", process_set=ps)
    h_int = hvd.allreduce_async(torch.tensor([r + 1, -(r + 1)], dtype=torch.int64),
                                name=tag + ".int", op=hvd.Sum, process_set=ps)
    h_gather = hvd.allgather_async(torch.full((r + 1, 2), float(r)), name=tag + ".gather",
                                   process_set=ps)
    h_bcast = hvd.broadcast_async(torch.full((4,), _value(r)), root_rank=ranks[-1],
                                  name=tag + ".bcast", process_set=ps)
    assert torch.equal(hvd.synchronize(h_sum), torch.full((7,), total))
    assert torch.equal(hvd.synchronize(h_avg),
                       torch.full((3,), total / k, dtype=torch.float64))
    assert hvd.synchronize(h_int).tolist() == [int(total), -int(total)]
    want_gather = torch.cat([torch.full((q + 1, 2), float(q)) for q in ranks])
    assert torch.equal(hvd.synchronize(h_gather), want_gather)
    assert torch.equal(hvd.synchronize(h_bcast), torch.full((4,), _value(ranks[-1])))
    # The ops gravac reduces by an allgather on the set, and the grouped call.
    assert hvd.allreduce(torch.tensor([float(r)]), op=hvd.Max, name=tag + ".max",
                         process_set=ps).item() == max(ranks)
    assert hvd.allreduce(torch.tensor([float(r)]), op=hvd.Min, name=tag + ".min",
                         process_set=ps).item() == min(ranks)
    grouped = hvd.grouped_allreduce([torch.full((2,), _value(r)), torch.ones(5)], op=hvd.Sum,
                                    name=tag + ".grouped", process_set=ps)
    assert torch.equal(grouped[0], torch.full((2,), total))
    assert torch.equal(grouped[1], torch.full((5,), float(k)))
    rows = hvd.reducescatter(torch.arange(2.0 * k).reshape(k, 2) * _value(r), op=hvd.Sum,
                             name=tag + ".rs", process_set=ps)
    me = ranks.index(r)
    assert torch.equal(rows, (torch.arange(2.0 * k).reshape(k, 2) * total)[me:me + 1])
    out, received = hvd.alltoall(torch.full((k,), float(r)), name=tag + ".a2a", process_set=ps)
    assert out.tolist() == [float(q) for q in ranks] and received.tolist() == [1] * k
    assert hvd.broadcast_object({"from": r}, root_rank=ranks[0], name=tag + ".obj",
                                process_set=ps) == {"from": ranks[0]}
    assert hvd.allgather_object(r, name=tag + ".objs", process_set=ps) == ranks
    hvd.barrier(process_set=ps)


def test_init_with_process_sets_runs_every_collective_on_each_set():
    n, r = hvd.size(), hvd.rank()
    sets = _candidate_sets(n)
    hvd.shutdown()
    hvd.init(process_sets=[hvd.ProcessSet(s) for s in sets[:2]] + sets[2:])
    registered = [hvd.process_set_by_id(i + 1) for i in range(len(sets))]
    assert [ps.ranks for ps in registered] == sets
    assert hvd.global_process_set.process_set_id == 0
    assert hvd.global_process_set.ranks == list(range(n))
    for round_ in range(2):  # the second round runs from the daemons' response caches
        for ps in registered:
            if ps.included():
                _check_set(ps, "ps%d.r%d" % (ps.process_set_id, round_))
            else:
                assert ps.rank() == -1
        # A global collective after the sets' ones: every rank, unaffected.
        assert hvd.allreduce(torch.ones(3), op=hvd.Sum, name="global.%d" % round_).tolist() == \
            [float(n)] * 3
    for ps in registered:
        assert hvd.remove_process_set(ps)


def test_unnamed_collectives_on_a_set_do_not_shift_global_names():
    n, r = hvd.size(), hvd.rank()
    ps = hvd.add_process_set([n - 1]) if n > 1 else hvd.ProcessSet([0])
    if n > 1 and ps.included():
        for _ in range(3):
            assert hvd.allreduce(torch.ones(1), op=hvd.Sum, process_set=ps).item() == 1.0
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [float(n)] * 2
    if n > 1:
        assert hvd.remove_process_set(ps)


def test_distributed_optimizer_and_broadcast_parameters_on_a_set():
    n, r = hvd.size(), hvd.rank()
    ranks = list(range(0, n, 2))
    ps = hvd.add_process_set(ranks) if len(ranks) < n else hvd.global_process_set
    if not ps.included():
        hvd.barrier()
        if ps is not hvd.global_process_set:
            assert hvd.remove_process_set(ps)
        return
    model = torch.nn.Linear(3, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(float(r))
    hvd.broadcast_parameters(model.state_dict(), root_rank=ranks[-1], prefix="ps.opt.",
                             process_set=ps)
    assert model.weight.tolist() == [[float(ranks[-1])] * 3]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters(), process_set=ps)
    model(torch.full((1, 3), _value(r))).sum().backward()  # gradient: the input, r + 1
    opt.step()
    mean = sum(_value(q) for q in ranks) / len(ranks)
    assert model.weight.tolist() == [[float(ranks[-1]) - mean] * 3]
    hvd.barrier()
    if ps is not hvd.global_process_set:
        assert hvd.remove_process_set(ps)


def test_add_and_remove_process_set():
    n, r = hvd.size(), hvd.rank()
    assert not hvd.remove_process_set(hvd.global_process_set)
    if n == 1:
        return
    ps = hvd.add_process_set(hvd.ProcessSet([n - 1, 0]))  # sorted, as Horovod
    assert ps.ranks == [0, n - 1] or ps.ranks == sorted({0, n - 1})
    if ps.included():
        assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="added",
                             process_set=ps).item() == 2.0
    assert hvd.remove_process_set(ps)
    assert ps.process_set_id is None
    if r in (0, n - 1):
        with pytest.raises(ValueError, match="not registered"):
            hvd.allreduce(torch.ones(1), name="removed", process_set=ps)


def test_bad_process_sets_raise_on_every_rank():
    n, r = hvd.size(), hvd.rank()
    with pytest.raises(ValueError, match="at least one rank"):
        hvd.ProcessSet([])
    with pytest.raises(ValueError, match="names rank 0 twice"):
        hvd.ProcessSet([0, 1, 0])
    with pytest.raises(ValueError, match=r"outside the job \(size %d\)" % n):
        hvd.add_process_set([0, n])
    with pytest.raises(ValueError, match="comm"):
        hvd.init(comm=object())
    if n == 1:
        return
    # Sets that differ between ranks: every rank raises, naming the ranks.
    with pytest.raises(ValueError, match="differ between ranks: ranks .* pass"):
        hvd.add_process_set([0] if r == 0 else [0, 1])
    ps = hvd.add_process_set([0])
    if r != 0:
        with pytest.raises(ValueError, match="rank %d is not in process set" % r):
            hvd.allreduce(torch.ones(1), name="outsider", process_set=ps)
    else:
        with pytest.raises(ValueError, match="compression runs on the global process set"):
            hvd.allreduce(torch.ones(8), name="compressed", process_set=ps,
                          compression=hvd.Compression.topk(2))
    # Removing a set with a collective in flight fails on every rank, naming it; once it is
    # synchronized the set can go.
    handle = None
    if r == 0:
        handle = hvd.allreduce_async(torch.ones(1), name="busy", process_set=ps)
    with pytest.raises(ValueError, match=r"in use: .*rank 0: busy"):
        hvd.remove_process_set(ps)
    if handle is not None:
        assert hvd.synchronize(handle).item() == 1.0
    assert hvd.remove_process_set(ps)


def _raw_allreduce(name, tensor, ranks):
    """Posts straight to gravacd, past the Python checks, so that the daemon's own are seen."""
    ctx = mpi_ops._state.ctx()
    return ctx.allreduce_async(name, tensor.data_ptr(), tensor.data_ptr(), list(tensor.shape),
                               mpi_ops._dtype_code(tensor, name), _gravac.SUM, -1, 0, False,
                               process_set=ranks)


@pytest.mark.skipif("GRAVAC_DAEMON_SOCKET" not in __import__("os").environ,
                    reason="the daemon's checks need gravacrun")
def test_daemon_refuses_bad_process_sets():
    n, r = hvd.size(), hvd.rank()
    t = torch.ones(2)
    others = [q for q in range(n) if q != r]
    cases = [([r, r], "names rank %d twice" % r), ([r, n], "rank %d is not a rank of the job" % n)]
    if others:
        cases.append((others, "rank %d is not in this process set" % r))
    for ranks, message in cases:
        with pytest.raises(hvd.GravacError, match=message):
            _raw_allreduce("raw.bad", t, ranks).wait()
    hvd.barrier()
    if n != 4:
        return
    # Ranks 0, 2 and 3 post one name with different sets ([0, 2] on rank 0, [0, 2, 3] on ranks
    # 2-3): each node completes it locally, and the negotiation fails it on all three, naming
    # the field; rank 1 takes no part.
    if r != 1:
        ranks = [0, 2] if r == 0 else [0, 2, 3]
        with pytest.raises(hvd.GravacError, match="process_set"):
            _raw_allreduce("raw.differ", torch.ones(2), ranks).wait()
    hvd.barrier()
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="after.bad").item() == n


def test_sync_batch_norm_on_a_set_uses_the_set_batches_only():
    n, r = hvd.size(), hvd.rank()
    ranks = list(range((n + 1) // 2))  # the lower half: one node at 4 ranks
    ps = hvd.add_process_set(ranks) if len(ranks) < n else hvd.global_process_set

    def batch(q):  # rank q's batch: q + 2 rows of 3 channels, distinct per rank
        return (torch.arange(3.0 * (q + 2), dtype=torch.float64).reshape(q + 2, 3) * (q + 1)
                + q) / 7.0

    sync = hvd.SyncBatchNorm(3, momentum=0.3, process_set=ps).double()
    if not ps.included():
        with pytest.raises(ValueError, match=r"rank %d is not in it" % r):
            sync(batch(r))
    else:
        ref = torch.nn.BatchNorm1d(3, momentum=0.3).double()
        x = batch(r).requires_grad_()
        y = sync(x)
        (y * y).sum().backward()
        xs = [batch(q).requires_grad_() for q in ranks]
        ys = ref(torch.cat(xs))
        (ys * ys).sum().backward()
        offset = sum(q + 2 for q in ranks if q < r)
        torch.testing.assert_close(y, ys[offset:offset + r + 2], rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(x.grad, xs[ranks.index(r)].grad, rtol=1e-9, atol=1e-9)
        torch.testing.assert_close(sync.running_mean, ref.running_mean, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(sync.running_var, ref.running_var, rtol=1e-10, atol=1e-12)
    hvd.barrier()
    if ps is not hvd.global_process_set:
        assert hvd.remove_process_set(ps)
