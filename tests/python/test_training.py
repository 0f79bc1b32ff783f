"""Short training runs with DistributedOptimizer: the loss falls and replicas stay identical."""

import pytest
import torch

import gravac.torch as hvd

STEPS = 30
BATCH = 32


def make_data(seed):
    """A learnable 4-class problem; every rank gets its own shard (seeded by rank)."""
    g = torch.Generator().manual_seed(1234)
    centers = torch.randn(4, 20, generator=g) * 3
    g = torch.Generator().manual_seed(seed + hvd.rank())
    labels = torch.randint(0, 4, (STEPS * BATCH,), generator=g)
    x = centers[labels] + torch.randn(STEPS * BATCH, 20, generator=g)
    return x, labels


def make_model(seed):
    torch.manual_seed(seed + 97 * hvd.rank())  # rank-specific init, fixed by the broadcast
    return torch.nn.Sequential(torch.nn.Linear(20, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 4))


def global_mean(value, name):
    return hvd.allreduce(torch.tensor(float(value)), name=name).item()


def assert_replicas_identical(model):
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = hvd.allgather(flat.unsqueeze(0))
    for r in range(1, hvd.size()):
        assert torch.equal(gathered[r], gathered[0]), "rank %d's parameters differ" % r


def shared_mappings():
    """(start, end) of this process's gravac shared-buffer mappings (/proc/self/maps)."""
    spans = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "/memfd:gravac-shared-" in line:
                start, end = line.split()[0].split("-")
                spans.append((int(start, 16), int(end, 16)))
    return spans


def in_shared_buffer(tensor):
    begin = tensor.data_ptr()
    end = begin + tensor.numel() * tensor.element_size()
    return any(start <= begin and end <= stop for start, stop in shared_mappings())


def train(compression, backward_passes_per_step=1, seed=0, lr=0.05, set_to_none=False):
    model = make_model(seed)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   compression=compression,
                                   backward_passes_per_step=backward_passes_per_step,
                                   samples_per_step=BATCH)
    x, y = make_data(seed)
    loss_fn = torch.nn.CrossEntropyLoss()
    losses = []
    thetas = []
    step = 0
    opt.grad_addresses = []  # per step: each gradient's address at step()
    for i in range(STEPS):
        xb, yb = x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH]
        loss = loss_fn(model(xb), yb)
        (loss / backward_passes_per_step).backward()
        losses.append(loss.item())
        if (i + 1) % backward_passes_per_step == 0:
            opt.step()
            opt.grad_addresses.append([p.grad.data_ptr() for p in model.parameters()])
            opt.zero_grad(set_to_none=set_to_none)
            thetas.append(opt.last_step_info["theta"])
            step += 1
    assert opt.gravac_step == step
    first = global_mean(sum(losses[:5]) / 5, "loss.first")
    last = global_mean(sum(losses[-5:]) / 5, "loss.last")
    opt.thetas = thetas
    return model, opt, first, last


def test_dense_training_loss_falls_and_replicas_identical():
    model, opt, first, last = train(hvd.Compression.none)
    assert last < 0.5 * first, (first, last)
    assert_replicas_identical(model)
    info = opt.last_step_info
    assert info["step"] == STEPS - 1  # the process's first optimizer: steps 0..STEPS-1
    assert opt.thetas == [1.0] * STEPS  # compress=0: every step dense


def test_gravac_training_loss_falls_and_replicas_identical():
    compression = hvd.Compression.gravac()
    model, opt, first, last = train(compression, seed=1)
    assert last < 0.7 * first, (first, last)
    assert_replicas_identical(model)
    info = opt.last_step_info
    assert all(compression.accepts_theta(t) for t in opt.thetas), opt.thetas
    assert max(opt.thetas) >= compression.theta_min, opt.thetas  # the daemon compressed
    # every rank saw the same θ and collective for the last step
    seen = hvd.allgather_object((info["theta"], info["collective"], info["decision_epoch"]))
    assert all(s == seen[0] for s in seen)


def test_fp16_compression_and_accumulation():
    model, opt, first, last = train(hvd.Compression.fp16, backward_passes_per_step=2, seed=2)
    assert last < 0.5 * first, (first, last)
    assert_replicas_identical(model)


def test_gradients_are_reduced_in_place_in_shared_buffers():
    """The daemon reads and writes the gradients in memory it maps: after the first step every
    gradient lives in a shared buffer and stays there (autograd accumulates into it)."""
    model, opt, first, last = train(hvd.Compression.none, seed=5)
    assert last < 0.5 * first, (first, last)
    assert_replicas_identical(model)
    for p in model.parameters():
        assert in_shared_buffer(p.grad), "a gradient of shape %s is not in a shared buffer" % (
            tuple(p.shape),)
    assert all(addresses == opt.grad_addresses[0] for addresses in opt.grad_addresses)


def test_gradients_allocated_anew_are_moved_into_the_shared_buffers():
    """zero_grad(set_to_none=True) drops the gradients: each step's new one is copied into the
    parameter's shared buffer, which is reused, and the results are the same as in place."""
    model, opt, first, last = train(hvd.Compression.none, seed=6, set_to_none=True)
    assert last < 0.5 * first, (first, last)
    assert_replicas_identical(model)
    assert all(addresses == opt.grad_addresses[0] for addresses in opt.grad_addresses)
    assert all(in_shared_buffer(opt._shared_grads[p]) for p in model.parameters())


def test_gradients_leave_during_backward():
    model = make_model(3)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    model(torch.randn(8, 20)).sum().backward()
    # every gradient was handed to the daemon by its hook before step()
    assert len(opt._handles) == len(list(model.parameters()))
    assert all(handle is not None for handle, _ in opt._handles.values())
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    opt.step()
    assert not opt._handles
    opt.zero_grad()


def test_duplicate_names_are_rejected():
    model = make_model(4)
    params = list(model.named_parameters())
    with pytest.raises(ValueError, match="unique"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[("same", p) for _, p in params])
