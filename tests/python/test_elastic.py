"""Horovod's elastic API (hvd.elastic) on gravac's fixed membership: commit/restore/sync of a
TorchState, ElasticSampler sharding and resume, and the retry paths of hvd.elastic.run.

Run at 2 ranks on one node, 2 ranks over two nodes and 1 rank without a launcher.
"""

import pytest
import torch

import gravac
import gravac.torch as hvd
from gravac.common.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from gravac.common.elastic import HostUpdateResult


def flat(model):
    return torch.cat([p.detach().reshape(-1).clone() for p in model.state_dict().values()])


def momentum(optimizer):
    return torch.cat([s["momentum_buffer"].reshape(-1).clone()
                      for s in optimizer.state_dict()["state"].values()])


def make(seed=0, name="m"):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        named_parameters=[("%s.%s" % (name, k), v) for k, v in model.named_parameters()])
    return model, optimizer


def train_step(model, optimizer, step):
    torch.manual_seed(1000 + step * 7 + hvd.rank())
    x, y = torch.randn(8, 6), torch.randint(0, 2, (8,))
    optimizer.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()


def gathered(tensor, name):
    return hvd.allgather(tensor.reshape(1, -1), name=name)


def test_exceptions_have_horovods_names_and_module_paths():
    assert issubclass(HorovodInternalError, gravac.GravacError)
    assert hvd.HorovodInternalError is HorovodInternalError
    assert issubclass(HostsUpdatedInterrupt, RuntimeError)
    assert HostsUpdatedInterrupt(skip_sync=True).skip_sync
    assert not HostsUpdatedInterrupt().skip_sync
    for name in ["run", "State", "ObjectState", "TorchState", "ElasticSampler"]:
        assert hasattr(hvd.elastic, name), name


def test_argument_errors_are_not_internal_errors():
    # Ranks disagreeing on a shape is a bug in the script, not a lost world: retrying cannot fix
    # it, so it must not be a HorovodInternalError (which hvd.elastic.run retries).
    if hvd.size() == 1:
        pytest.skip("needs two ranks to disagree")
    with pytest.raises(gravac.GravacError) as info:
        hvd.allreduce(torch.ones(hvd.rank() + 1), name="elastic.mismatch")
    assert not isinstance(info.value, HorovodInternalError)
    assert info.value.status == "GRAVAC_ERR_MISMATCH"


def test_restore_brings_back_the_committed_model_optimizer_and_fields():
    model, optimizer = make(name="restore")
    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0, history=[])
    for step in range(2):
        train_step(model, optimizer, step)
    state.epoch, state.batch = 1, 2
    state.history.append("committed")
    state.commit()
    params, moments = flat(model), momentum(optimizer)
    for step in range(2, 4):
        train_step(model, optimizer, step)
    state.epoch, state.batch = 3, 7
    state.history = state.history + ["lost"]
    assert not torch.equal(flat(model), params)
    assert not torch.equal(momentum(optimizer), moments)

    state.restore()
    assert torch.equal(flat(model), params)
    assert torch.equal(momentum(optimizer), moments)
    assert (state.epoch, state.batch, state.history) == (1, 2, ["committed"])
    # The same objects were restored in place: the optimizer still steps this model.
    assert state.model is model and state.optimizer is optimizer
    train_step(model, optimizer, 9)
    assert not torch.equal(flat(model), params)


def test_commit_keeps_copies_not_references():
    model, optimizer = make(name="copies")
    state = hvd.elastic.TorchState(model, optimizer, weights={"w": torch.zeros(3)})
    before = flat(model)
    state.commit()
    with torch.no_grad():
        model[0].weight.add_(1.0)
    state.weights["w"].add_(5.0)  # in place, after the commit
    state.restore()
    assert torch.equal(flat(model), before)
    assert torch.equal(state.weights["w"], torch.zeros(3))
    state.weights["w"].add_(2.0)  # a restored value is a copy too: the commit stays intact
    state.restore()
    assert torch.equal(state.weights["w"], torch.zeros(3))


def local_step(model, optimizer, step):
    """A step of this rank alone (a plain optimizer: no collective)."""
    torch.manual_seed(2000 + step)
    optimizer.zero_grad()
    model(torch.randn(8, 6)).sum().backward()
    optimizer.step()


def test_sync_makes_every_rank_equal_rank_0():
    torch.manual_seed(hvd.rank())  # different weights per rank
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(hvd.rank() + 1):  # and different optimizer moments
        local_step(model, optimizer, step)
    state = hvd.elastic.TorchState(model, optimizer, epoch=10 + hvd.rank(), tag="r%d" % hvd.rank())
    rank0_params = hvd.broadcast(flat(model), root_rank=0, name="sync.rank0.params")
    rank0_moments = hvd.broadcast(momentum(optimizer), root_rank=0, name="sync.rank0.moments")
    if hvd.size() > 1:
        before = gathered(flat(model), "sync.before")
        assert not torch.equal(before[0], before[1])
    state.sync()
    assert torch.equal(flat(model), rank0_params)
    assert torch.equal(momentum(optimizer), rank0_moments)
    assert (state.epoch, state.tag) == (10, "r0")
    everyone = gathered(flat(model), "sync.after")
    assert all(torch.equal(row, everyone[0]) for row in everyone)
    # The synced optimizer state keeps working.
    local_step(model, optimizer, 99)
    everyone = gathered(flat(model), "sync.after.step")
    assert all(torch.equal(row, everyone[0]) for row in everyone)


def test_sync_aligns_the_training_step_of_the_ranks():
    # A failure can leave the ranks a training step apart; gravacd refuses gradients whose step
    # differs across ranks, and sync() makes them continue from the largest.
    from gravac.torch import mpi_ops
    model, optimizer = make(name="steps")
    state = hvd.elastic.TorchState(model, optimizer)
    base = mpi_ops._state.train_step
    mpi_ops._state.train_step = base + hvd.rank()
    state.sync()
    assert mpi_ops._state.train_step == base + hvd.size() - 1
    train_step(model, optimizer, 0)  # fails with "step ... differs" unless aligned
    everyone = gathered(flat(model), "steps.after")
    assert all(torch.equal(row, everyone[0]) for row in everyone)


def test_elastic_sampler_shards_by_rank():
    dataset = list(range(11))
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=3)
    mine = list(iter(sampler))
    assert len(mine) == len(sampler) == -(-11 // hvd.size())
    shards = hvd.allgather_object(mine, name="sampler.shards")
    order = list(range(11))
    import random
    random.Random(3).shuffle(order)
    padded = order + order[:len(mine) * hvd.size() - 11]
    for r, shard in enumerate(shards):
        assert shard == padded[r::hvd.size()]
    assert sorted(set(i for shard in shards for i in shard)) == dataset
    # Another epoch, another order, on every rank alike.
    sampler.set_epoch(1)
    assert hvd.allgather_object(list(iter(sampler)), name="sampler.epoch1") != shards


def test_elastic_sampler_resumes_after_restore():
    dataset = list(range(40))
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=False)
    model, optimizer = make(name="sampler")
    state = hvd.elastic.TorchState(model, optimizer, train_sampler=sampler, batch=0)
    batch = 2
    seen = []
    for state.batch, idx in enumerate(torch.utils.data.BatchSampler(iter(sampler), batch, False)):
        seen.extend(idx)
        sampler.record_batch(state.batch, batch)
        if state.batch == 2:
            state.commit()  # 3 batches of 2 on every rank are done
        if state.batch == 4:
            break
    processed_at_commit = 3 * batch * hvd.size()
    state.restore()
    assert sampler.processed_num == processed_at_commit
    assert state.batch == 2
    rest = list(iter(sampler))
    assert rest == list(range(processed_at_commit, 40))[hvd.rank()::hvd.size()]
    assert len(sampler) == len(rest)
    # The batches after the commit are processed again; those before it are not.
    assert seen[:3 * batch] == list(range(40))[hvd.rank()::hvd.size()][:3 * batch]
    assert not set(seen[:3 * batch]) & set(rest)
    sampler.set_epoch(1)
    assert sampler.processed_num == 0 and len(list(iter(sampler))) == 40 // hvd.size()
    with pytest.raises(ValueError):
        sampler.record_batch(0, -1)


def test_run_restores_resets_and_retries_after_an_internal_error():
    model, optimizer = make(name="retry")
    state = hvd.elastic.TorchState(model, optimizer, epoch=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(hvd.size())])
    calls = []

    @hvd.elastic.run
    def train(state, steps):
        calls.append((state.epoch, flat(state.model)))
        if len(calls) == 1:
            train_step(state.model, state.optimizer, 0)
            state.epoch = 1
            state.commit()
            train_step(state.model, state.optimizer, 1)
            state.epoch = 2  # uncommitted: lost by the failure
            raise HorovodInternalError("injected failure of the world")
        for step in range(steps):
            train_step(state.model, state.optimizer, 10 + step)
        return "finished at epoch %d" % state.epoch

    committed = []
    original_save = state.save

    def save():
        original_save()
        committed.append(flat(state.model))

    state.save = save
    assert train(state, 2) == "finished at epoch 1"
    assert len(calls) == 2
    assert resets == [hvd.size()]
    assert calls[1][0] == 1  # the committed epoch, not the uncommitted 2
    assert torch.equal(calls[1][1], committed[-1])  # the committed weights
    assert hvd.is_initialized()
    everyone = gathered(flat(model), "retry.after")
    assert all(torch.equal(row, everyone[0]) for row in everyone)


def test_run_resets_without_restore_after_hosts_updated():
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, step=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append(True)])
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(state.step)
        while state.step < 4:
            state.step += 1
            if state.step == 2 and len(calls) == 1 and hvd.rank() == 0:
                # Only rank 0 hears of the update; commit() raises on every rank.
                state.on_hosts_updated(5, HostUpdateResult.removed)
            state.commit()
        return state.step

    assert train(state) == 4
    assert calls == [0, 2]  # called again from the committed step 2, not from 0
    assert resets == [True]
    # A stale update (not newer than the last seen) does not interrupt.
    state.on_hosts_updated(3, HostUpdateResult.added)
    state.commit()


def test_reset_limit_ends_the_loop_at_the_next_interruption(monkeypatch):
    monkeypatch.setenv("GRAVAC_RESET_LIMIT", "1")
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, step=0)
    calls = []

    @hvd.elastic.run
    def train(state):
        calls.append(state.step)
        state.step += 1
        state.commit()
        raise HorovodInternalError("injected failure %d" % len(calls))

    with pytest.raises(RuntimeError, match=r"reset 1 times, the reset limit \(--reset-limit 1\); "
                                           r"not again after 'injected failure 2'") as err:
        train(state)
    assert calls == [0, 1]  # one reset (retried from the commit), then the limit
    assert isinstance(err.value.__cause__, HorovodInternalError)
    assert hvd.is_initialized()  # the one reset re-formed the world
    monkeypatch.setenv("GRAVAC_RESET_LIMIT", "x")
    with pytest.raises(ValueError, match="GRAVAC_RESET_LIMIT"):
        train(state)


def test_run_rejects_a_non_state_argument():
    @hvd.elastic.run
    def train(state):
        return state

    with pytest.raises(ValueError, match="State"):
        train({"epoch": 0})
