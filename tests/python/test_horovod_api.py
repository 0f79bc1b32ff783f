"""The rest of Horovod's torch API, with exact expected values computed from rank and size.

Run at 1 rank without a launcher, 2 ranks on one node and 4 ranks over two nodes.
"""

import os

import pytest
import torch

import gravac.torch as hvd


def test_cuda_built_and_nccl_built_tell_the_truth():
    cuda = os.environ.get("TEST_GRAVAC_CUDA_BUILT")
    nccl = os.environ.get("TEST_GRAVAC_NCCL_BUILT")
    if cuda is None or nccl is None:
        pytest.skip("run through CTest, which says how libgravac and gravacd were built")
    assert hvd.cuda_built() is (cuda == "1")
    # As the gravacd serving this rank said in its Welcome.
    assert hvd.nccl_built() is (nccl == "1")


def wrap(value, bits):
    """`value` wrapped to a signed integer of `bits` bits (two's complement)."""
    span = 1 << bits
    return (value + span // 2) % span - span // 2


def test_cross_rank_and_size():
    node = int(os.environ.get("GRAVAC_NODE_RANK", "0"))
    assert hvd.cross_rank() == node
    assert hvd.cross_size() == hvd.size() // hvd.local_size()
    assert hvd.is_homogeneous()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64,
                                   torch.int16, torch.int8])
def test_min_max_product(dtype):
    r, n = hvd.rank(), hvd.size()
    x = torch.tensor([r + 1, -(r + 1), 2, 5 - r], dtype=dtype)
    mn = hvd.allreduce(x, op=hvd.Min, name="api.min.%s" % dtype)
    mx = hvd.allreduce(x, op=hvd.Max, name="api.max.%s" % dtype)
    pr = hvd.allreduce(x, op=hvd.Product, name="api.prod.%s" % dtype)
    ranks = range(n)
    assert mn.dtype == mx.dtype == pr.dtype == dtype
    assert mn.tolist() == [1, -n, 2, 5 - (n - 1)]
    assert mx.tolist() == [n, -1, 2, 5]
    fact = 1
    signed = 1
    last = 1
    for k in ranks:
        fact *= k + 1
        signed *= -(k + 1)
        last *= 5 - k
    assert pr.tolist() == [fact, signed, 2 ** n, last]
    # In place, with the scale factors applied around the reduction.
    y = x.clone()
    hvd.allreduce_(y, op=hvd.Max, name="api.max_.%s" % dtype)
    assert y.tolist() == [n, -1, 2, 5]


def test_bool_min_and_max():
    r, n = hvd.rank(), hvd.size()
    x = torch.tensor([True, r == 0, r % 2 == 1, False])
    assert hvd.allreduce(x, op=hvd.Min, name="api.bool.min").tolist() == [True, n == 1, False,
                                                                          False]
    assert hvd.allreduce(x, op=hvd.Max, name="api.bool.max").tolist() == [True, True, n > 1,
                                                                          False]
    with pytest.raises(ValueError, match="bool tensors reduce with Min"):
        hvd.allreduce(x, op=hvd.Sum, name="api.bool.sum")


@pytest.mark.parametrize("dtype,bits", [(torch.int8, 8), (torch.int16, 16)])
def test_small_integer_sum_wraps_and_average_truncates(dtype, bits):
    r, n = hvd.rank(), hvd.size()
    x = torch.tensor([100, -100, r, 3], dtype=dtype)
    y = hvd.allreduce(x, op=hvd.Sum, name="api.small.sum.%s" % dtype)
    assert y.dtype == dtype
    assert y.tolist() == [wrap(100 * n, bits), wrap(-100 * n, bits), n * (n - 1) // 2, 3 * n]
    z = hvd.allreduce(torch.tensor([r, -3 * (r + 1)], dtype=dtype), op=hvd.Average,
                      name="api.small.avg.%s" % dtype)
    total = -3 * n * (n + 1) // 2
    assert z.tolist() == [int((n * (n - 1) // 2) / n), int(total / n)]


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.bool, torch.uint8])
def test_allgather_and_broadcast_of_small_types(dtype):
    r, n = hvd.rank(), hvd.size()
    x = (torch.arange(2 * (r + 1)).reshape(r + 1, 2) % 2 == 1) if dtype == torch.bool else \
        (torch.arange(2 * (r + 1)).reshape(r + 1, 2) - 3 * r).to(dtype)
    gathered = hvd.allgather(x, name="api.gather.%s" % dtype)
    want = []
    for k in range(n):
        rows = torch.arange(2 * (k + 1)).reshape(k + 1, 2)
        want.append(rows % 2 == 1 if dtype == torch.bool else (rows - 3 * k).to(dtype))
    assert gathered.dtype == dtype
    assert torch.equal(gathered, torch.cat(want))
    root = n - 1
    b = torch.full((3,), r - 2).to(dtype) if dtype != torch.bool else torch.tensor([r == root] * 3)
    got = hvd.broadcast(b, root, name="api.bcast.%s" % dtype)
    assert torch.equal(got, torch.full((3,), root - 2).to(dtype) if dtype != torch.bool
                       else torch.tensor([True] * 3))


def test_grouped_allreduce():
    r, n = hvd.rank(), hvd.size()
    tensors = [torch.full((2, 2), float(r)), torch.tensor([r + 1], dtype=torch.int64),
               torch.arange(3, dtype=torch.float64) * (r + 1)]
    out = hvd.grouped_allreduce(tensors, op=hvd.Sum, name="api.group")
    assert [t.dtype for t in out] == [torch.float32, torch.int64, torch.float64]
    assert out[0].tolist() == [[n * (n - 1) / 2] * 2] * 2
    assert out[1].tolist() == [n * (n + 1) // 2]
    assert out[2].tolist() == [0.0, n * (n + 1) / 2, n * (n + 1)]
    avg = hvd.grouped_allreduce([torch.tensor([float(r)])], name="api.group.avg")
    assert avg[0].tolist() == [(n - 1) / 2]
    same = hvd.grouped_allreduce_(tensors, op=hvd.Max, name="api.group.inplace")
    assert same[0] is tensors[0] and tensors[1].tolist() == [n]
    handle = hvd.grouped_allreduce_async([torch.ones(1)], op=hvd.Sum, name="api.group.async")
    assert hvd.synchronize(handle)[0].tolist() == [float(n)]
    with pytest.raises(ValueError, match="at least one tensor"):
        hvd.grouped_allreduce([])


def test_reducescatter():
    r, n = hvd.rank(), hvd.size()
    dim0 = 2 * n + 1
    x = torch.arange(dim0 * 2, dtype=torch.float64).reshape(dim0, 2) * (r + 1)
    rows = [dim0 // n + (1 if k < dim0 % n else 0) for k in range(n)]
    offset = sum(rows[:r])
    full = torch.arange(dim0 * 2, dtype=torch.float64).reshape(dim0, 2) * (n * (n + 1) / 2)
    got = hvd.reducescatter(x, op=hvd.Sum, name="api.rs.sum")
    assert torch.equal(got, full[offset:offset + rows[r]])
    got = hvd.reducescatter(x, name="api.rs.avg")  # Horovod's default: Average
    assert torch.equal(got, full[offset:offset + rows[r]] / n)
    with pytest.raises(ValueError, match="Sum or Average, not Min"):
        hvd.reducescatter(x, op=hvd.Min)
    with pytest.raises(ValueError, match="at least one dimension"):
        hvd.reducescatter(torch.tensor(1.0))


def splits_of(k, n):
    return [(k + j) % 3 + 1 for j in range(n)]


def test_alltoall():
    r, n = hvd.rank(), hvd.size()
    splits = splits_of(r, n)
    x = torch.arange(sum(splits), dtype=torch.int64) + 100 * r
    out, received = hvd.alltoall(x, torch.tensor(splits), name="api.a2a")
    want = []
    for k in range(n):
        sk = splits_of(k, n)
        start = sum(sk[:r])
        want += [100 * k + i for i in range(start, start + sk[r])]
    assert out.tolist() == want
    assert received.tolist() == [splits_of(k, n)[r] for k in range(n)]
    # Without splits: dim 0 divided evenly.
    y = torch.arange(2 * n, dtype=torch.float32).reshape(2 * n, 1) + 10 * r
    out, received = hvd.alltoall(y, name="api.a2a.even")
    assert out.reshape(-1).tolist() == [10 * k + 2 * r + i for k in range(n) for i in range(2)]
    assert received.tolist() == [2] * n


def test_alltoall_bad_splits_fail_on_every_rank_naming_the_rank():
    r, n = hvd.rank(), hvd.size()
    bad = n - 1
    splits = [1] * n
    if r == bad:
        splits[0] += 1  # adds up to n + 1 rows, not n
    with pytest.raises(ValueError, match=r"rank\(s\) %d are invalid" % bad):
        hvd.alltoall(torch.zeros(n, 2), torch.tensor(splits), name="api.a2a.bad")
    if n > 1:  # every rank's rows fail to divide: each rank names all of them
        with pytest.raises(ValueError, match="does not divide evenly"):
            hvd.alltoall(torch.zeros(2 * n + 1), name="api.a2a.uneven")
    # The job goes on.
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum, name="api.after_bad").tolist() == [float(n)]


def reference_adasum(rows):
    level = [row.double() for row in rows]
    while len(level) > 1:
        nxt = []
        for a, b in zip(level[0::2], level[1::2]):
            dot, aa, bb = float(a @ b), float(a @ a), float(b @ b)
            nxt.append((1 - dot / (2 * aa)) * a + (1 - dot / (2 * bb)) * b)
        level = nxt
    return level[0]


def test_adasum():
    r, n = hvd.rank(), hvd.size()
    # Orthogonal contributions add up; identical ones give themselves back.
    e = torch.zeros(n, dtype=torch.float64)
    e[r] = 2.0
    assert hvd.allreduce(e, op=hvd.Adasum, name="api.adasum.orth").tolist() == [2.0] * n
    v = torch.tensor([3.0, -1.0, 0.5], dtype=torch.float64)
    assert hvd.allreduce(v, op=hvd.Adasum, name="api.adasum.same").tolist() == v.tolist()
    rows = [torch.tensor([1.0 + k, 2.0 - k, 0.5 * k]) for k in range(n)]
    got = hvd.allreduce(rows[r], op=hvd.Adasum, name="api.adasum.tree")
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, reference_adasum(rows).float(), rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="floating-point"):
        hvd.allreduce(torch.ones(2, dtype=torch.int32), op=hvd.Adasum)


def test_adasum_distributed_optimizer_combines_weight_changes():
    r, n = hvd.rank(), hvd.size()
    w = torch.nn.Parameter(torch.zeros(n, dtype=torch.float64))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([w], lr=0.5), named_parameters=[("w", w)],
                                   op=hvd.Adasum)
    # Orthogonal local steps (-e_r) add up.
    g = torch.zeros(n, dtype=torch.float64)
    g[r] = 2.0
    opt.zero_grad()
    (w * g).sum().backward()
    opt.step()
    assert w.detach().tolist() == [-1.0] * n
    # Identical local steps (-0.5 each) give one step, not n.
    opt.zero_grad()
    w.sum().backward()
    opt.step()
    assert w.detach().tolist() == [-1.5] * n
    with pytest.raises(ValueError, match="GraVAC compressors"):
        hvd.DistributedOptimizer(torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1),
                                 op=hvd.Adasum, compression=hvd.Compression.topk(4))


def test_compressing_other_ops_is_an_error():
    with pytest.raises(ValueError, match="only Sum and Average"):
        hvd.allreduce(torch.ones(4), op=hvd.Min, compression=hvd.Compression.topk(2),
                      name="api.compress.min")
    with pytest.raises(ValueError, match="Average or Sum"):
        hvd.DistributedOptimizer(torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=1),
                                 op=hvd.Max)


def batch(k, shape):
    count = 1
    for d in shape:
        count *= d
    return torch.sin(torch.arange(count, dtype=torch.float64) * 0.37 + k).reshape(shape) * (k + 1)


@pytest.mark.parametrize("dims", [1, 2])
def test_sync_batch_norm_matches_batch_norm_on_the_whole_batch(dims):
    r, n = hvd.rank(), hvd.size()
    channels = 3
    shape = lambda k: (k + 2, channels) if dims == 1 else (k + 2, channels, 2, 2)  # noqa: E731
    sync = hvd.SyncBatchNorm(channels, momentum=0.3).double()
    ref = (torch.nn.BatchNorm1d if dims == 1 else torch.nn.BatchNorm2d)(channels,
                                                                       momentum=0.3).double()
    with torch.no_grad():
        for m in (sync, ref):
            m.weight.copy_(torch.tensor([1.5, -0.5, 2.0], dtype=torch.float64))
            m.bias.copy_(torch.tensor([0.1, 0.2, -0.3], dtype=torch.float64))
    x = batch(r, shape(r)).requires_grad_()
    y = sync(x)
    w = batch(10 + r, shape(r))
    (y * w).sum().backward()

    xs = [batch(k, shape(k)).requires_grad_() for k in range(n)]
    ys = ref(torch.cat(xs))
    (ys * torch.cat([batch(10 + k, shape(k)) for k in range(n)])).sum().backward()
    offset = sum(k + 2 for k in range(r))
    torch.testing.assert_close(y, ys[offset:offset + r + 2], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(x.grad, xs[r].grad, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(sync.running_mean, ref.running_mean, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(sync.running_var, ref.running_var, rtol=1e-10, atol=1e-12)
    sync.eval()
    ref.eval()
    torch.testing.assert_close(sync(x.detach()), ref(x.detach()), rtol=1e-10, atol=1e-10)


def test_broadcast_parameters_on_a_plain_list():
    r, n = hvd.rank(), hvd.size()
    root = n - 1
    params = [torch.full((2,), float(r)), torch.full((3,), float(10 * r))]
    hvd.broadcast_parameters(params, root_rank=root)
    assert params[0].tolist() == [float(root)] * 2
    assert params[1].tolist() == [float(10 * root)] * 3
    torch.manual_seed(r)
    model = torch.nn.Linear(2, 2)
    hvd.broadcast_parameters(model.parameters(), root_rank=0, prefix="api.model.")
    gathered = hvd.allgather(model.weight.detach().reshape(1, -1), name="api.model.check")
    assert all(torch.equal(gathered[k], gathered[0]) for k in range(n))


def test_process_sets_are_refused():
    with pytest.raises(ValueError, match="process_sets"):
        hvd.init(process_sets=[[0]])
