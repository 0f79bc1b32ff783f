"""Compression's job-level arguments (sparse value precision, policy settings) and its worker-level
min_elements: validation, repr, gravacrun_args and controller_env, the example's
--print-gravacrun-args; a compressed allreduce in a job that CMake starts with --sparse_values
fp16, whose kept values arrive rounded to fp16; and a tensor under min_elements, which arrives
dense."""

import os
import subprocess
import sys

import pytest
import torch

import gravac.torch as hvd

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "python", "train_digits.py")


def flags(args):
    """gravacrun_args() as {flag: value}."""
    assert len(args) % 2 == 0
    return dict(zip(args[0::2], args[1::2]))


@pytest.mark.parametrize("values", ["fp32", "fp16", "bf16"])
def test_topk_and_gravac_carry_the_values(values):
    topk = hvd.Compression.topk(100, values=values)
    assert topk.values == values
    assert flags(topk.gravacrun_args())["--sparse_values"] == values
    assert flags(topk.gravacrun_args())["--theta_min"] == "100"
    assert topk.controller_env()["GRAVAC_SPARSE_VALUES"] == values
    assert "values=%s" % values in repr(topk)
    gravac = hvd.Compression.gravac(theta_max=500, values=values)
    assert gravac.values == values
    assert flags(gravac.gravacrun_args())["--sparse_values"] == values
    assert flags(gravac.gravacrun_args())["--theta_max"] == "500"
    assert gravac.controller_env()["GRAVAC_SPARSE_VALUES"] == values
    assert "sparse_values=%s" % values in repr(gravac)


def test_values_default_to_fp32():
    assert hvd.Compression.topk(10).values == "fp32"
    assert hvd.Compression.gravac().values == "fp32"
    assert flags(hvd.Compression.gravac().gravacrun_args())["--sparse_values"] == "fp32"


@pytest.mark.parametrize("bad", ["fp8", "FP16", "float16", "", None, 16])
def test_unknown_values_are_refused(bad):
    with pytest.raises(ValueError, match="values = .*must be one of fp32, fp16, bf16"):
        hvd.Compression.topk(10, values=bad)
    with pytest.raises(ValueError, match="values = .*must be one of fp32, fp16, bf16"):
        hvd.Compression.gravac(values=bad)


def test_min_relative_gain_is_left_to_the_job_unless_given():
    assert "--min_relative_gain" not in flags(hvd.Compression.gravac().gravacrun_args())
    guard = hvd.Compression.gravac(min_relative_gain=0)
    assert flags(guard.gravacrun_args())["--min_relative_gain"] == "0"
    assert guard.controller_env()["GRAVAC_MIN_RELATIVE_GAIN"] == "0"
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="min_relative_gain = .*within \\[0, 1\\]"):
            hvd.Compression.gravac(min_relative_gain=bad)


def run_example(*args):
    out = subprocess.run([sys.executable, EXAMPLE] + list(args) + ["--print-gravacrun-args"],
                         capture_output=True, text=True, timeout=60, check=True)
    return flags(out.stdout.split())


def test_example_prints_the_sparse_values_flag():
    static = run_example("--mode", "static", "--theta", "50", "--sparse-values", "bf16")
    assert static["--sparse_values"] == "bf16"
    assert static["--theta_min"] == "50"
    assert run_example("--mode", "gravac", "--sparse-values", "fp16")["--sparse_values"] == "fp16"
    assert run_example("--mode", "gravac")["--sparse_values"] == "fp32"
    assert run_example("--mode", "gravac", "--min-relative-gain", "0.3")[
        "--min_relative_gain"] == "0.3"


def test_job_sends_fp16_rounded_values():
    # Both ranks send the same tensor: top-k (θ = θ_min = 10) keeps the same 100 largest elements
    # (900..999) on each node, and the sum is twice the value each node sent, which the daemon
    # rounded to fp16 (spacing 0.5 there: i + 1/3 arrives as i + 0.5).
    n = 1000
    x = torch.arange(n, dtype=torch.float32) + 1.0 / 3.0
    y = hvd.allreduce(x, name="fp16_values", op=hvd.Sum,
                      compression=hvd.Compression.topk(10, values="fp16"))
    want = torch.zeros(n)
    want[900:] = 2 * x[900:].half().float()
    assert torch.equal(y, want), (y[900:910], want[900:910])
    assert not torch.equal(y[900:], 2 * x[900:])  # fp32 values would arrive unrounded


def test_min_elements_is_validated_and_shown():
    assert hvd.Compression.gravac().min_elements == 0
    topk = hvd.Compression.topk(10, min_elements=4096)
    assert topk.min_elements == 4096
    assert "min_elements=4096" in repr(topk)
    assert "min_elements" not in repr(hvd.Compression.topk(10))
    # A worker's setting: not among the job's flags.
    assert "--min_elements" not in flags(topk.gravacrun_args())
    assert topk.compresses(torch.zeros(4096)) and not topk.compresses(torch.zeros(4095))
    assert not topk.compresses(torch.zeros(8192, dtype=torch.float64))
    for bad in (-1, 1.5, "8", True):
        with pytest.raises(ValueError, match="min_elements = .*int >= 0"):
            hvd.Compression.gravac(min_elements=bad)


def test_job_sends_small_tensors_dense_under_min_elements():
    # θ = θ_min = 10 on 1000 elements keeps 100 per node; below min_elements the tensor goes
    # through the dense allreduce and arrives whole (small integers: the sum is exact).
    x = torch.arange(1000, dtype=torch.float32)
    sparse = hvd.allreduce(x, name="min_elements_sparse", op=hvd.Sum,
                           compression=hvd.Compression.topk(10, min_elements=1000))
    assert int((sparse != 0).sum()) == 100, sparse
    dense = hvd.allreduce(x, name="min_elements_dense", op=hvd.Sum,
                          compression=hvd.Compression.topk(10, min_elements=1001))
    assert torch.equal(dense, 2 * x), dense
