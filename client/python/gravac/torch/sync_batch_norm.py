"""SyncBatchNorm: batch normalization with statistics over the whole job's batch (Horovod's).

In training with more than one rank, the per-channel mean and biased variance are those of the
union of every rank's batch: each rank's element count, sum and sum of squares (float64) are
summed in one allreduce. The running statistics take the unbiased variance (N / (N - 1)) with
the module's momentum, as torch's BatchNorm. Backward needs two more job-wide sums per channel
(of dy and of dy·x̂), so the input gradient is that of the job's total loss; the weight and bias
gradients are this rank's own (DistributedOptimizer averages them, as Horovod's). In eval mode
or with one rank it is a plain BatchNorm. With ``process_set=`` (Horovod's argument) the
statistics span the batches of that set's ranks only; a rank outside the set refuses to train
with it (ValueError naming the set), as every collective on a set refuses a non-member.

Thread-safety: like any torch module.
"""

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

from gravac.torch import mpi_ops
from gravac.torch.process_sets import global_process_set


def _channel_view(x):
    """x as (C, rest): channels first, every other dimension flattened."""
    return x.transpose(0, 1).reshape(x.shape[1], -1)


def _broadcastable(v, x):
    return v.reshape((1, -1) + (1,) * (x.dim() - 2))


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps, running_mean, running_var, momentum, process_set):
        xc = _channel_view(x.detach()).double()
        count = xc.shape[1]
        local = torch.cat([torch.tensor([float(count)], dtype=torch.float64), xc.sum(1),
                           (xc * xc).sum(1)])
        total = mpi_ops.allreduce(local, op=mpi_ops.Sum, process_set=process_set)
        channels = x.shape[1]
        n = total[0]
        mean = total[1:1 + channels] / n
        var = (total[1 + channels:] / n - mean * mean).clamp_min(0)
        if running_mean is not None:
            with torch.no_grad():
                running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype) * momentum)
                unbiased = var * n / (n - 1) if n > 1 else var
                running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype) * momentum)
        invstd = 1.0 / torch.sqrt(var + eps)
        xhat = (x.detach().double() - _broadcastable(mean, x)) * _broadcastable(invstd, x)
        w = weight.detach().double() if weight is not None else torch.ones(channels,
                                                                           dtype=torch.float64)
        y = xhat * _broadcastable(w, x)
        if bias is not None:
            y = y + _broadcastable(bias.detach().double(), x)
        ctx.save_for_backward(xhat, invstd, w)
        ctx.n = n
        ctx.process_set = process_set
        ctx.has_weight = weight is not None
        ctx.has_bias = bias is not None
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        xhat, invstd, w = ctx.saved_tensors
        dyd = dy.double()
        sum_dy = _channel_view(dyd).sum(1)
        sum_dy_xhat = _channel_view(dyd * xhat).sum(1)
        channels = sum_dy.numel()
        total = mpi_ops.allreduce(torch.cat([sum_dy, sum_dy_xhat]), op=mpi_ops.Sum,
                                  process_set=ctx.process_set)
        g_dy, g_dy_xhat = total[:channels], total[channels:]
        n = ctx.n
        dx = _broadcastable(w * invstd, dy) * (
            dyd - _broadcastable(g_dy / n, dy) - xhat * _broadcastable(g_dy_xhat / n, dy))
        dweight = sum_dy_xhat.to(dy.dtype) if ctx.has_weight else None
        dbias = sum_dy.to(dy.dtype) if ctx.has_bias else None
        return dx.to(dy.dtype), dweight, dbias, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """torch.nn.BatchNorm{1,2,3}d whose batch statistics span every rank, or the ranks of
    `process_set` (see module doc)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):  # noqa: A002 (torch's name)
        if input.dim() < 2:
            raise ValueError("expected at least 2D input (got %dD input)" % input.dim())

    def forward(self, input):  # noqa: A002
        self._check_input_dim(input)
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
        ps = self.process_set
        if self.training and not ps.included():
            raise ValueError("SyncBatchNorm on process set %s: rank %d is not in it, so it "
                             "cannot train with statistics over that set's batches"
                             % (ps.ranks, mpi_ops.rank()))
        if not self.training or ps.size() == 1:
            momentum = self.momentum if self.momentum is not None else (
                1.0 / float(self.num_batches_tracked))
            return F.batch_norm(input, self.running_mean, self.running_var, self.weight,
                                self.bias, self.training or not self.track_running_stats,
                                momentum, self.eps)
        momentum = self.momentum if self.momentum is not None else (
            1.0 / float(self.num_batches_tracked))
        return _SyncBatchNormFunction.apply(input, self.weight, self.bias, self.eps,
                                            self.running_mean, self.running_var, momentum, ps)
