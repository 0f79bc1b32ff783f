"""Gradient compression choices (Horovod's ``Compression`` plus gravac's own).

Horovod's compressors transform a tensor before the allreduce and back after it:
``Compression.none`` and ``Compression.fp16`` (float tensors travel as float16).

gravac's compressors do not transform anything in Python: they mark fp32 gradients
``compress=1`` so that the daemon compresses them (top-k with error feedback) at the job's agreed
compression factor θ. θ is a job-level decision made by gravac-controller, so the policy settings
belong to the job, not to one worker; they map to gravacrun flags (forwarded to the controller)
or to the controller's environment variables:

=====================  ======================  =====================
Compression argument   gravacrun flag          controller env
=====================  ======================  =====================
theta_min              --theta_min             GRAVAC_THETA_MIN
theta_max              --theta_max             GRAVAC_THETA_MAX
epsilon                --epsilon               GRAVAC_EPSILON
omega                  --omega                 GRAVAC_OMEGA
policy                 --policy                GRAVAC_POLICY
scale                  --scale                 GRAVAC_SCALE
window                 --window                GRAVAC_WINDOW
alpha                  --alpha                 GRAVAC_ALPHA
eval_steps             --eval_steps            GRAVAC_EVAL_STEPS
min_dwell              --min_dwell             GRAVAC_MIN_DWELL
min_relative_gain      --min_relative_gain     GRAVAC_MIN_RELATIVE_GAIN
compressor             --compressor            GRAVAC_COMPRESSOR
values                 --sparse_values         GRAVAC_SPARSE_VALUES
=====================  ======================  =====================

``values`` is the precision the kept values travel at: "fp32" (4 bytes), or "fp16" / "bf16"
(2 bytes; indices stay 4-byte int32, so a kept element costs 6 bytes instead of 8). The daemon
rounds the values before sending them and error feedback keeps the rounding error.

``min_dwell`` (steps a chosen θ is held before the gains may change it; 0 = the paper's
per-step choice) and ``min_relative_gain`` (the least gain_c / gain_min for θ_c to be sent;
0 = the paper's ε alone) are left to the job's defaults (25, 0.6) when None, and then not among
the flags.

``min_elements`` (default 0: every fp32 gradient) is this worker's, not the job's: fp32
gradients with fewer elements are not marked for compression and go through the dense
allreduce every step (no residual, not in the policy's norms). Biases and small convolutions cost
little to send whole, while top-k of a few hundred elements withholds most of a layer's update:
on bench/e2e's Fashion-MNIST CNN, where 1.1% of the parameters sit in tensors under 32,768
elements, sending them dense closed most of static θ = 10's early accuracy gap to dense SGD
(bench/e2e/README.md). Every rank must pass the same value (the tensors' modes must agree).

``Compression.topk(θ)`` is a static θ: ``--theta_min θ --theta_max θ --epsilon 1e-9`` (the
smallest ε keeps the per-step guard from falling back to dense). Each compressor's
``gravacrun_args()`` returns these flags and ``controller_env()`` the variables, and
``DistributedOptimizer`` warns once when the θ the daemon reports is outside the compressor's
range (the job was started with other settings).
"""

import math

import torch


class Compressor:
    """Interface: compress(tensor) -> (tensor, ctx); decompress(tensor, ctx) -> tensor.

    ``daemon_compress`` (gravac): True when the daemon may compress fp32 tensors at the job's θ.
    """

    daemon_compress = False

    @staticmethod
    def compress(tensor):
        raise NotImplementedError("Compressor.compress is abstract")

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError("Compressor.decompress is abstract")


class NoneCompressor(Compressor):
    """No compression: the tensor travels as it is (dense allreduce)."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Floating-point tensors travel as float16 and come back in their own dtype."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != torch.float16:
            return tensor.type(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        if ctx is not None:
            return tensor.type(ctx)
        return tensor


_POLICIES = ("geometric", "exponential")
_COMPRESSORS = ("topk", "dgc", "redsync", "randomk")
_VALUES = ("fp32", "fp16", "bf16")


def _check_values(values):
    if values not in _VALUES:
        raise ValueError("values = %r, must be one of %s" % (values, ", ".join(_VALUES)))
    return values


class GravacCompressor(Compressor):
    """Lets the daemon compress fp32 gradients with the GraVAC policy's θ (see module doc)."""

    daemon_compress = True

    def __init__(self, theta_min=10.0, theta_max=10000.0, epsilon=0.75, omega=0.05,
                 policy="geometric", scale=2.0, window=25, alpha=0.05, eval_steps=500,
                 compressor="topk", values="fp32", min_dwell=None, min_relative_gain=None,
                 min_elements=0):
        theta_min, theta_max = float(theta_min), float(theta_max)
        if not (math.isfinite(theta_min) and theta_min >= 1.0):
            raise ValueError("theta_min = %g, must be a finite CF >= 1" % theta_min)
        if not (math.isfinite(theta_max) and theta_max >= theta_min):
            raise ValueError("theta_max = %g, must be finite and >= theta_min (%g)"
                             % (theta_max, theta_min))
        if policy not in _POLICIES:
            raise ValueError("policy = %r, must be one of %s" % (policy, ", ".join(_POLICIES)))
        if policy == "geometric" and not float(scale) > 1.0:
            raise ValueError("scale = %g, geometric scaling needs scale > 1" % float(scale))
        if policy == "exponential" and not theta_min > 1.0:
            raise ValueError("exponential scaling needs theta_min > 1, got %g" % theta_min)
        if not float(epsilon) > 0.0:
            raise ValueError("epsilon = %g, must be > 0" % float(epsilon))
        if not float(omega) > 0.0:
            raise ValueError("omega = %g, must be > 0" % float(omega))
        if int(window) < 1:
            raise ValueError("window = %d, must be >= 1" % int(window))
        if not 0.0 <= float(alpha) < 1.0:
            raise ValueError("alpha = %g, must be in [0, 1)" % float(alpha))
        if int(eval_steps) <= int(window):
            raise ValueError("eval_steps = %d, must exceed window (%d)"
                             % (int(eval_steps), int(window)))
        if min_dwell is not None and int(min_dwell) < 0:
            raise ValueError("min_dwell = %d, must be >= 0 (0: no dwell)" % int(min_dwell))
        if min_relative_gain is not None and not 0.0 <= float(min_relative_gain) <= 1.0:
            raise ValueError("min_relative_gain = %g, must be within [0, 1] (0: epsilon alone)"
                             % float(min_relative_gain))
        if isinstance(min_elements, bool) or not isinstance(min_elements, int) or min_elements < 0:
            raise ValueError("min_elements = %r, must be an int >= 0 (0: compress every fp32 "
                             "gradient)" % (min_elements,))
        if compressor not in _COMPRESSORS:
            raise ValueError("compressor = %r, must be one of %s"
                             % (compressor, ", ".join(_COMPRESSORS)))
        self.theta_min = theta_min
        self.theta_max = theta_max
        self.epsilon = float(epsilon)
        self.omega = float(omega)
        self.policy = policy
        self.scale = float(scale)
        self.window = int(window)
        self.alpha = float(alpha)
        self.eval_steps = int(eval_steps)
        self.min_dwell = None if min_dwell is None else int(min_dwell)
        self.min_relative_gain = None if min_relative_gain is None else float(min_relative_gain)
        self.compressor = compressor
        self.values = _check_values(values)
        self.min_elements = min_elements

    def compresses(self, tensor):
        """True when the daemon is to compress `tensor`: fp32 with at least min_elements."""
        return tensor.dtype == torch.float32 and tensor.numel() >= self.min_elements

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor

    def settings(self):
        """The job-level settings as (name, value) pairs, in gravacrun's flag names."""
        return [("compressor", self.compressor), ("sparse_values", self.values),
                ("theta_min", "%g" % self.theta_min),
                ("theta_max", "%g" % self.theta_max), ("epsilon", "%g" % self.epsilon),
                ("omega", "%g" % self.omega), ("policy", self.policy),
                ("scale", "%g" % self.scale), ("window", str(self.window)),
                ("alpha", "%g" % self.alpha), ("eval_steps", str(self.eval_steps))] + (
                    [] if self.min_dwell is None else [("min_dwell", str(self.min_dwell))]) + (
                    [] if self.min_relative_gain is None
                    else [("min_relative_gain", "%g" % self.min_relative_gain)])

    def gravacrun_args(self):
        """The gravacrun flags that start a job with these settings."""
        args = []
        for name, value in self.settings():
            args += ["--" + name, value]
        return args

    def controller_env(self):
        """The gravac-controller environment variables for these settings."""
        return {"GRAVAC_" + name.upper(): value for name, value in self.settings()}

    def accepts_theta(self, theta):
        """True when a θ the daemon reports is possible under these settings (1 = dense)."""
        return theta == 1.0 or self.theta_min * (1 - 1e-9) <= theta <= self.theta_max * (1 + 1e-9)

    def __repr__(self):
        return "GravacCompressor(%s)" % ", ".join(
            "%s=%s" % kv for kv in self.settings() + self._client_settings())

    def _client_settings(self):
        return [("min_elements", str(self.min_elements))] if self.min_elements else []


class TopKCompressor(GravacCompressor):
    """A static compression factor θ: top-k of each fp32 gradient, k = n/θ, error feedback."""

    def __init__(self, theta, compressor="topk", values="fp32", min_elements=0):
        theta = float(theta)
        super().__init__(theta_min=theta, theta_max=theta, epsilon=1e-9, compressor=compressor,
                         values=values, min_elements=min_elements)
        self.theta = theta

    def __repr__(self):
        return "TopKCompressor(theta=%g, compressor=%s, values=%s%s)" % (
            self.theta, self.compressor, self.values,
            "".join(", %s=%s" % kv for kv in self._client_settings()))


class Compression:
    """The compression choices for allreduce() and DistributedOptimizer."""

    none = NoneCompressor
    fp16 = FP16Compressor

    @staticmethod
    def topk(theta, compressor="topk", values="fp32", min_elements=0):
        """Static compression factor θ (the job must run with --theta_min θ --theta_max θ);
        ``values``: "fp32", "fp16" or "bf16", the precision the kept values travel at;
        ``min_elements``: gradients with fewer elements are sent dense (see the module doc)."""
        return TopKCompressor(theta, compressor=compressor, values=values,
                              min_elements=min_elements)

    @staticmethod
    def gravac(theta_min=10.0, theta_max=10000.0, epsilon=0.75, omega=0.05, policy="geometric",
               scale=2.0, window=25, alpha=0.05, eval_steps=500, compressor="topk",
               values="fp32", min_dwell=None, min_relative_gain=None, min_elements=0):
        """Adaptive θ chosen by the GraVAC policy (settings: see the module doc)."""
        return GravacCompressor(theta_min=theta_min, theta_max=theta_max, epsilon=epsilon,
                                omega=omega, policy=policy, scale=scale, window=window,
                                alpha=alpha, eval_steps=eval_steps, compressor=compressor,
                                values=values, min_dwell=min_dwell,
                                min_relative_gain=min_relative_gain,
                                min_elements=min_elements)
