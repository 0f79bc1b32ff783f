#!/usr/bin/python3
"""Horovod's synthetic benchmark shape (pytorch_synthetic_benchmark.py) on gravac.torch.

A torchvision model trains on one fixed random batch; rank 0 prints images per second per rank
and for the job. Written in Horovod's shape so that the only gravac line is the import: the
Horovod original runs with ``import horovod.torch as hvd`` instead.

  gravacrun -np 2 --nodes 2 /usr/bin/python3 examples/python/horovod/synthetic_benchmark.py \
      --model squeezenet1_1 --image-size 64

--image-size (default 224, Horovod's) shrinks the images for CPUs. At the end every rank checks
that all replicas hold the same weights (they must: same start, same averaged gradients).
"""

import argparse
import timeit

import numpy as np
import torch
import torch.nn.functional as F
import torch.optim as optim
from torchvision import models

import gravac.torch as hvd

parser = argparse.ArgumentParser(description="PyTorch Synthetic Benchmark",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="use fp16 compression during allreduce")
parser.add_argument("--model", type=str, default="resnet50", help="model to benchmark")
parser.add_argument("--batch-size", type=int, default=32, help="input batch size")
parser.add_argument("--image-size", type=int, default=224, help="image height and width")
parser.add_argument("--num-warmup-batches", type=int, default=10,
                    help="number of warm-up batches that don't count towards benchmark")
parser.add_argument("--num-batches-per-iter", type=int, default=10,
                    help="number of batches per benchmark iteration")
parser.add_argument("--num-iters", type=int, default=10, help="number of benchmark iterations")
parser.add_argument("--use-adasum", action="store_true", default=False,
                    help="use adasum algorithm to do reduction")
args = parser.parse_args()

hvd.init()
torch.set_num_threads(1)

model = getattr(models, args.model)()
lr_scaler = hvd.size() if not args.use_adasum else 1
optimizer = optim.SGD(model.parameters(), lr=0.01 * lr_scaler)
compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     compression=compression,
                                     op=hvd.Adasum if args.use_adasum else hvd.Average)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)

torch.manual_seed(hvd.rank())
data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
target = torch.LongTensor(args.batch_size).random_() % 1000


def benchmark_step():
    optimizer.zero_grad()
    output = model(data)
    loss = F.cross_entropy(output, target)
    loss.backward()
    optimizer.step()


def log(s, nl=True):
    if hvd.rank() != 0:
        return
    print(s, end="\n" if nl else "", flush=True)


log("Model: %s" % args.model)
log("Batch size: %d" % args.batch_size)
log("Number of ranks: %d" % hvd.size())

log("Running warmup...")
timeit.timeit(benchmark_step, number=args.num_warmup_batches)

log("Running benchmark...")
img_secs = []
for x in range(args.num_iters):
    t = timeit.timeit(benchmark_step, number=args.num_batches_per_iter)
    img_sec = args.batch_size * args.num_batches_per_iter / t
    log("Iter #%d: %.1f img/sec per rank" % (x, img_sec))
    img_secs.append(img_sec)

img_sec_mean = np.mean(img_secs)
img_sec_conf = 1.96 * np.std(img_secs)
log("Img/sec per rank: %.1f +-%.1f" % (img_sec_mean, img_sec_conf))
log("Total img/sec on %d rank(s): %.1f +-%.1f"
    % (hvd.size(), hvd.size() * img_sec_mean, hvd.size() * img_sec_conf))

# The replicas must agree: the same start and the same averaged gradients at every step.
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
assert torch.isfinite(flat).all(), "non-finite weights"
spread = hvd.allreduce(flat, op=hvd.Max, name="check.max") - hvd.allreduce(flat, op=hvd.Min,
                                                                            name="check.min")
assert float(spread.abs().max()) <= 1e-5, "replicas differ by %g" % float(spread.abs().max())
log("replicas agree")
hvd.shutdown()
