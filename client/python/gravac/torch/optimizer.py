"""DistributedOptimizer: Horovod's wrapper that averages gradients across ranks while backward runs.

Each parameter gets an autograd hook that fires once its gradient is accumulated
(``register_post_accumulate_grad_hook`` where PyTorch has it, else a hook on the parameter's
AccumulateGrad node, as Horovod does). The hook hands the gradient to the daemon at once
(in place, asynchronously), so communication overlaps the rest of the backward pass;
``step()`` (or ``synchronize()``) waits for every gradient and then runs the wrapped optimizer.

Gradients live in shared buffers (memory the daemon maps): the first hook of a parameter moves
its gradient there and sets ``p.grad`` to it, and autograd accumulates into it from then on as
long as ``zero_grad()`` keeps it (``set_to_none=False``, PyTorch 1.x's default). The daemon then
reads the gradient and writes the average into it directly, with no staging copies; a gradient
that autograd allocated anew is copied into the parameter's buffer first.

Every gradient carries the training step (a per-process counter of synchronized steps, from 0,
shared by all DistributedOptimizers so that it increases for every tensor name) and the
samples this rank processed in it (``samples_per_step`` / ``set_samples``; 0 = unknown, the
controller then counts one per rank) for the GraVAC statistics. With a GraVAC compressor
(Compression.topk / Compression.gravac) fp32 gradients are marked for compression at the job's θ;
the θ, collective and decision epoch the daemon used are kept in ``last_step_info``.

Thread-safety: like torch.optim optimizers, one thread drives an instance.
"""

import contextlib
import warnings
from collections import OrderedDict

import torch

from gravac.torch import mpi_ops
from gravac.torch import process_sets as _sets
from gravac.torch.compression import Compression
from gravac.torch.process_sets import global_process_set


class _DistributedOptimizer(torch.optim.Optimizer):
    # The methods below are copied into a subclass of the wrapped optimizer's class (see
    # DistributedOptimizer), hence the explicit super(self.__class__, self).

    _gravac_distributed = True  # broadcast_optimizer_state steps the wrapped optimizer itself

    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 op=mpi_ops.Average, gradient_predivide_factor=1.0, sparse_as_dense=False,
                 samples_per_step=0, process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._process_set = process_set
        if _sets.wire_ranks(process_set, "DistributedOptimizer") and getattr(
                compression, "daemon_compress", False):
            raise ValueError("DistributedOptimizer: GraVAC compression runs on the global "
                             "process set only; use Compression.none or Compression.fp16 on "
                             "process set %d" % process_set.process_set_id)
        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [("noname.%d.%d" % (i, j), v)
                                for i, group in enumerate(self.param_groups)
                                for j, v in enumerate(group["params"])]
        if any(not isinstance(p, tuple) for p in named_parameters):
            raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                             "usually produced by model.named_parameters().")
        names = [k for k, _ in named_parameters]
        dups = sorted({k for k in names if names.count(k) > 1})
        if dups:
            raise ValueError("Parameter names in named_parameters must be unique. Found "
                             "duplicates: %s" % ", ".join(dups))
        all_params = {id(v) for group in self.param_groups for v in group["params"]}
        named_ids = {id(v) for _, v in named_parameters}
        if all_params - named_ids:
            raise ValueError("named_parameters was specified, but one or more model parameters "
                             "were not named. Python object ids: %s"
                             % ", ".join(str(i) for i in sorted(all_params - named_ids)))
        if op not in (mpi_ops.Average, mpi_ops.Sum):
            raise ValueError("op %r: DistributedOptimizer reduces gradients with Average or Sum"
                             % (mpi_ops._OP_NAMES.get(op, op),))
        if gradient_predivide_factor != 1.0 and op != mpi_ops.Average:
            raise ValueError("gradient_predivide_factor needs op == Average")
        if int(backward_passes_per_step) < 1:
            raise ValueError("backward_passes_per_step must be >= 1")

        # Gradient names: "grad.<param>" for the process's first DistributedOptimizer,
        # "grad<i>.<param>" for the i-th later one (a new model must not inherit the daemon's
        # error-feedback residuals of an earlier one). Ranks create optimizers in the same order.
        index = next(mpi_ops._state.optimizers)
        prefix = "grad." if index == 0 else "grad%d." % index
        self._parameter_names = {v: prefix + k for k, v in sorted(named_parameters)}
        self.backward_passes_per_step = int(backward_passes_per_step)
        self.op = op
        self.gradient_predivide_factor = float(gradient_predivide_factor)
        self.sparse_as_dense = sparse_as_dense
        self._allreduce_delay = {v: self.backward_passes_per_step
                                 for _, v in sorted(named_parameters)}
        self._handles = OrderedDict()
        self._grad_accs = []
        self._hook_handles = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        self._steps_done = 0
        self._gravac_samples = int(samples_per_step)
        self._theta_warned = False
        self._shared_grads = {}  # parameter -> its gradient's tensor in a shared buffer
        self._shared_failed = False
        self.last_step_info = None
        self._register_hooks()

    # -- gravac extensions ------------------------------------------------------------------

    def set_samples(self, samples):
        """Samples this rank processes per step from now on (for the job's throughput)."""
        self._gravac_samples = int(samples)

    @property
    def gravac_step(self):
        """Steps this optimizer synchronized so far."""
        return self._steps_done

    # -- Horovod API --------------------------------------------------------------------------

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group["params"]:
                if not p.requires_grad:
                    continue
                self._requires_update.add(p)
                if hasattr(p, "register_post_accumulate_grad_hook"):
                    self._hook_handles.append(
                        p.register_post_accumulate_grad_hook(self._make_hook(p)))
                else:
                    p_tmp = p.expand_as(p)
                    grad_acc = p_tmp.grad_fn.next_functions[0][0]
                    self._hook_handles.append(grad_acc.register_hook(self._make_hook(p)))
                    self._grad_accs.append(grad_acc)

    def _allreduce_grad_async(self, p):
        name = self._parameter_names[p]
        if p.grad.is_sparse:
            if not self.sparse_as_dense:
                raise ValueError("parameter %s has a sparse gradient: gravac reduces dense "
                                 "tensors (use sparse_as_dense=True)" % self._parameter_names[p])
            p.grad = p.grad.to_dense()
        tensor_compressed, ctx = self._compression.compress(p.grad)
        if tensor_compressed is p.grad:
            tensor_compressed = self._shared_grad(p)
        op, prescale, postscale = self.op, 1.0, 1.0
        if self.gradient_predivide_factor != 1.0:
            op = mpi_ops.Sum
            prescale = 1.0 / self.gradient_predivide_factor
            postscale = self.gradient_predivide_factor / _sets.set_size(self._process_set)
        compress = mpi_ops._daemon_compress(self._compression, tensor_compressed)
        handle = mpi_ops._allreduce_async(tensor_compressed, tensor_compressed, name, op, prescale,
                                          postscale, step=mpi_ops._state.train_step,
                                          samples=self._gravac_samples, compress=compress,
                                          process_set=self._process_set)
        return handle, ctx

    def _shared_grad(self, p):
        """p.grad, moved into the parameter's shared buffer if it is not there already."""
        grad = p.grad
        shared = self._shared_grads.get(p)
        if shared is not None and shared.data_ptr() == grad.data_ptr():
            return grad
        if (self._shared_failed or grad.device.type != "cpu" or not grad.is_contiguous()
                or grad.numel() == 0):
            return grad
        if shared is None or shared.shape != grad.shape or shared.dtype != grad.dtype:
            try:
                shared = mpi_ops._shared_empty_like(grad)
            except mpi_ops.GravacError as e:  # e.g. no memory for another segment: stage
                warnings.warn("gravac: gradients stay in private memory (%s)" % e)
                self._shared_failed = True
                return grad
            self._shared_grads[p] = shared
        shared.copy_(grad)
        p.grad = shared
        return shared

    def _make_hook(self, p):
        def hook(*ignore):
            if p in self._handles and self._handles[p][0] is not None:
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        "Gradients were computed more than backward_passes_per_step times "
                        "before call to step(). Increase backward_passes_per_step to "
                        "accumulate gradients locally.")
            assert not p.grad.requires_grad
            assert self._allreduce_delay[p] > 0
            handle, ctx = None, None
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)

        return hook

    def synchronize(self):
        """Waits for every gradient of this step; raises GravacError with the daemon's message."""
        for p in self._requires_update - set(self._handles):
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)

        error = None
        best = None  # info of the largest gradient
        for p, (handle, ctx) in self._handles.items():
            try:
                output, info = mpi_ops._wait(handle)
            except Exception as e:  # keep waiting: every buffer must be released
                error = error or e
                continue
            finally:
                self._allreduce_delay[p] = self.backward_passes_per_step
            if error is None:
                decompressed = self._compression.decompress(output, ctx)
                if decompressed is not p.grad:
                    p.grad.copy_(decompressed)
                if info is not None and (best is None or p.numel() > best[0]):
                    best = (p.numel(), info)
        self._handles.clear()
        self._synchronized = True
        step = mpi_ops._state.train_step
        mpi_ops._state.train_step += 1
        self._steps_done += 1
        if error is not None:
            raise error
        if best is not None:
            theta, collective, epoch = best[1]
            self.last_step_info = {"step": step, "theta": theta, "collective": collective,
                                   "decision_epoch": epoch}
            self._check_theta(theta)

    def _check_theta(self, theta):
        accepts = getattr(self._compression, "accepts_theta", None)
        if accepts is None or self._theta_warned or accepts(theta):
            return
        self._theta_warned = True
        if mpi_ops.rank() == 0:
            warnings.warn("the daemon compressed with theta = %g, outside %r: start the job with "
                          "gravacrun %s" % (theta, self._compression,
                                            " ".join(self._compression.gravacrun_args())))

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Within it, step() does not synchronize (call synchronize() yourself before)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    """Horovod's Adasum optimizer: each rank takes the wrapped optimizer's step on its own
    gradients, and the weights' changes (not the gradients) are combined with Adasum
    (dense_ops): p = p_start + Adasum over ranks of (p_after_local_step - p_start). The methods
    are copied into a subclass of the wrapped optimizer's class, as for _DistributedOptimizer."""

    _gravac_distributed = True

    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1):
        super(self.__class__, self).__init__(params)
        if getattr(compression, "daemon_compress", False):
            raise ValueError("op=Adasum combines dense weight changes; GraVAC compressors apply "
                             "to Average/Sum of gradients (use Compression.none or fp16)")
        if int(backward_passes_per_step) != 1:
            raise ValueError("op=Adasum: backward_passes_per_step must be 1 in gravac")
        self._compression = compression
        if named_parameters is not None:
            named = {v: k for k, v in named_parameters}
        else:
            named = {}
        index = next(mpi_ops._state.optimizers)
        params_all = [p for group in self.param_groups for p in group["params"]]
        self._adasum_names = {p: "adasum%d.%s" % (index, named.get(p, "noname.%d" % i))
                              for i, p in enumerate(params_all)}

    def synchronize(self):
        """Nothing to wait for: the exchange happens in step()."""

    @contextlib.contextmanager
    def skip_synchronize(self):
        yield

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        params = [p for group in self.param_groups for p in group["params"] if p.requires_grad]
        starts = [p.detach().clone() for p in params]
        super(self.__class__, self).step()
        handles = []
        for p, start in zip(params, starts):
            delta, ctx = self._compression.compress(p.detach() - start)
            handles.append((mpi_ops.allreduce_async(delta, name=self._adasum_names[p],
                                                    op=mpi_ops.Adasum), ctx))
        error = None
        for p, start, (handle, ctx) in zip(params, starts, handles):
            try:
                combined = self._compression.decompress(mpi_ops.synchronize(handle), ctx)
            except Exception as e:  # keep waiting for the others
                error = error or e
                continue
            with torch.no_grad():
                p.copy_(start + combined)
        if error is not None:
            raise error
        return loss


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=mpi_ops.Average,
                         gradient_predivide_factor=1.0, num_groups=0, groups=None,
                         sparse_as_dense=False, samples_per_step=0,
                         process_set=global_process_set):
    """Wraps `optimizer` so that step() applies gradients averaged (op) over all ranks.

    As Horovod's: named_parameters names the gradients (model.named_parameters()), compression
    is a Compression choice, backward_passes_per_step accumulates that many backward passes
    locally before one exchange. ``num_groups`` / ``groups`` are accepted for compatibility and
    need nothing here: the daemon fuses small tensors itself (GRAVAC_FUSION_THRESHOLD).
    ``process_set`` averages over the ranks of that set only (they alone create the optimizer;
    GraVAC compression needs the global set). gravac's own: samples_per_step (samples per rank
    per step, for the job's throughput).
    """
    if num_groups < 0:
        raise ValueError("num_groups must be >= 0")
    if op == mpi_ops.Adasum:
        if process_set is not global_process_set:
            raise ValueError("DistributedOptimizer(op=Adasum) runs on the global process set only")
        cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
                   dict(_DistributedAdasumOptimizer.__dict__))
        return cls(optimizer.param_groups, named_parameters, compression,
                   backward_passes_per_step)
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, sparse_as_dense, samples_per_step, process_set)
