"""hvd.start_timeline / stop_timeline (issue 21): the daemon of rank 0 writes a Chrome trace in
Horovod's shape (a JSON array; one process per tensor named after it; complete events), with each
tensor's local reduce, negotiation (one tick per node), operation and its phases (compression,
transfer, decompression for a compressed allreduce), and the θ and decision epoch in force.

CMake starts the job with a static top-k compressor (θ = 10), so the compressed allreduce runs
sparse whenever there is more than one node.
"""

import json
import os
import tempfile

import pytest
import torch

import gravac.torch as hvd

STEPS = 3


def _trace_path():
    path = None
    if hvd.rank() == 0:
        folder = tempfile.mkdtemp(prefix="gravac-timeline-")
        path = os.path.join(folder, "timeline.json")
    return hvd.broadcast_object(path, root_rank=0, name="timeline.path")


def _run_steps():
    r, n = hvd.rank(), hvd.size()
    topk = hvd.Compression.topk(10)
    for step in range(STEPS):
        dense = hvd.allreduce(torch.full((6,), float(r + step), dtype=torch.float64),
                              name="tl.dense", op=hvd.Sum)
        assert dense.tolist() == [float(sum(q + step for q in range(n)))] * 6
        g = torch.zeros(100)
        g[r] = 1.0 + step  # one large value per rank: top-k at θ = 10 keeps it
        hvd.allreduce(g, name="tl.sparse", op=hvd.Sum, compression=topk)
    hvd.allgather(torch.full((r + 1, 2), float(r)), name="tl.gather")
    hvd.broadcast(torch.arange(3.0), root_rank=n - 1, name="tl.bcast")


def _events_by_tensor(trace):
    names = {e["pid"]: e["args"]["name"] for e in trace
             if e.get("ph") == "M" and e["name"] == "process_name"}
    by = {}
    for e in trace:
        if e.get("ph") == "X":
            by.setdefault(names[e["pid"]], []).append(e)
    return names, by


def _span(events, name):
    found = [e for e in events if e["name"] == name]
    assert found, "no %s event in %s" % (name, sorted({e["name"] for e in events}))
    return found


def _end(e):
    return e["ts"] + e["dur"]


def test_timeline_records_every_phase_in_order():
    path = _trace_path()
    hvd.start_timeline(path)
    _run_steps()
    hvd.stop_timeline()
    hvd.barrier()
    if hvd.rank() != 0:
        return
    with open(path) as f:
        trace = json.load(f)  # a complete JSON array after stop_timeline
    names, by = _events_by_tensor(trace)
    assert names[0] == "gravac job"
    nodes = hvd.cross_size()
    for tensor, kind, count in [("tl.dense", "ALLREDUCE", STEPS), ("tl.sparse", "ALLREDUCE", STEPS),
                                ("tl.gather", "ALLGATHER", 1), ("tl.bcast", "BROADCAST", 1)]:
        events = by[tensor]
        local = sorted(_span(events, "LOCAL_REDUCE"), key=lambda e: e["ts"])
        negotiate = sorted(_span(events, "NEGOTIATE_" + kind), key=lambda e: e["ts"])
        ops = sorted(_span(events, kind), key=lambda e: e["ts"])
        assert len(local) == len(negotiate) == len(ops) == count, (tensor, events)
        ticks = [e for e in events if e["dur"] == 0 and e["name"][0].isdigit()]
        assert len(ticks) == count * nodes, (tensor, ticks)
        # Node 0 (which writes the trace) ticks when its local phase has ended; the negotiation
        # starts with the first node's tick and ends before the operation.
        ls = hvd.local_size()
        node0 = "0" if ls == 1 else "0-%d" % (ls - 1)
        own_ticks = sorted((e for e in ticks if e["name"] == node0), key=lambda e: e["ts"])
        assert len(own_ticks) == count, (tensor, ticks)
        for lr, ng, op, tick in zip(local, negotiate, ops, own_ticks):
            assert _end(lr) <= tick["ts"] + 1, (tensor, lr, tick)
            assert ng["ts"] <= tick["ts"] <= _end(ng) + 1, (tensor, ng, tick)
            assert _end(ng) <= op["ts"] + 1, (tensor, ng, op)
            assert set(op["args"]) >= {"collective", "theta", "decision_epoch", "step"}
            phases = sorted([e for e in events if op["ts"] <= e["ts"] and _end(e) <= _end(op) + 1
                             and e is not op and e["dur"] >= 0 and not e["name"][0].isdigit()],
                            key=lambda e: e["ts"])
            assert len(phases) == 3, (tensor, phases)
            for a, b in zip(phases, phases[1:]):
                assert _end(a) <= b["ts"] + 1, (tensor, a, b)
            want = {"dense_allreduce": ["MEMCPY_IN_FUSION_BUFFER", "RING_ALLREDUCE",
                                        "MEMCPY_OUT_FUSION_BUFFER"],
                    "sparse_allgather": ["COMPRESS", "SPARSE_ALLGATHER", "DECOMPRESS"],
                    "allgather": ["PREPARE", "RING_ALLGATHER", "COPY_OUT"],
                    "broadcast": ["PREPARE", "TREE_BROADCAST", "COPY_OUT"]}
            assert [e["name"] for e in phases] == want[op["args"]["collective"]], (tensor, phases)
        if tensor == "tl.sparse" and nodes > 1:
            assert all(op["args"]["collective"] == "sparse_allgather" for op in ops), ops
            assert all(op["args"]["theta"] == 10 for op in ops), ops
        if tensor == "tl.dense":
            assert all(op["args"]["theta"] == 1 for op in ops), ops
    counters = [e for e in trace if e.get("ph") == "C"]
    assert {e["name"] for e in counters} == {"theta", "decision_epoch"}
    assert all(e["args"]["epoch"] >= 0 for e in counters if e["name"] == "decision_epoch")


def test_timeline_bad_input():
    with pytest.raises(ValueError, match="mark_cycles"):
        hvd.start_timeline("/tmp/unused.json", mark_cycles=True)
    if hvd.rank() == 0:
        with pytest.raises(hvd.GravacError, match="/nonexistent-gravac-dir/t.json"):
            hvd.start_timeline("/nonexistent-gravac-dir/t.json")
    # Training goes on afterwards.
    y = hvd.allreduce(torch.ones(2), name="tl.after.bad", op=hvd.Sum)
    assert torch.equal(y, torch.full((2,), float(hvd.size())))
