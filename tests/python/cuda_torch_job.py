"""One worker of a 1-node gravac.torch job on CUDA tensors, in Horovod's usual script shape
(scripts/gpu_check.sh runs it with `gravacrun -np 2`): torch.cuda.set_device(hvd.local_rank()),
a CUDA model, broadcast_parameters, DistributedOptimizer. Its gradients' allreduces go to
gravac_allreduce_device_async (no host copy in Python when hvd.cuda_built()). Checks an exact
Sum of a CUDA tensor, trains 20 steps, and compares every rank's parameters by checksum: prints
"torch_cuda_job rank R: ok ..." and exits 0 when the replicas are identical, else 1; exit 77
without a usable CUDA device.
"""

import sys
import zlib

import torch
import torch.nn.functional as F

import gravac.torch as hvd


def main():
    if not torch.cuda.is_available():
        print("torch_cuda_job: skipped, torch sees no CUDA device", file=sys.stderr)
        return 77
    hvd.init()
    torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
    rank, size = hvd.rank(), hvd.size()

    t = torch.full((100003,), float(rank + 1), device="cuda")
    total = hvd.allreduce(t, op=hvd.Sum, name="exact_sum")
    expected = float(size * (size + 1) // 2)
    if not total.is_cuda or not bool(torch.all(total == expected)):
        print("torch_cuda_job rank %d: FAILED: exact sum is not %g everywhere" % (rank, expected),
              file=sys.stderr)
        return 1

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    data = torch.Generator().manual_seed(1 + rank)
    loss = None
    for _ in range(20):
        x = torch.randn(64, 256, generator=data).cuda()
        y = torch.randint(0, 10, (64,), generator=data).cuda()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()
    mine = zlib.crc32(flat.numpy().tobytes())
    every = hvd.allgather_object(mine)
    ok = len(set(every)) == 1
    print("torch_cuda_job rank %d: %s cuda_built %s loss %.4f checksum %08x"
          % (rank, "ok" if ok else "FAILED: replicas differ %s" % every, hvd.cuda_built(),
             float(loss), mine), flush=True)
    hvd.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
