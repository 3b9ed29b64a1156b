"""The Megatron-style TP block on 2 and 4 ranks through the cais backend: its loss curve
matches single-process training; the benchmark's smoke test passes (gloo vs cais)."""
import os
import subprocess
import sys

import pytest

import cais.launch as launch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TP = os.path.join(ROOT, "python", "examples", "tp")
sys.path.insert(0, TP)
import tp_transformer as tp  # noqa: E402

# float32 all-reduces reorder sums: per-step losses agree to ~1e-7 relative
# (measured); 1e-5 leaves room for other reduction orders, and a wrong shard,
# a missing or doubled all-reduce shows at 1e-2 or more from the first step.
RTOL = 1e-5
STEPS = 15


@pytest.mark.parametrize("n", [2, 4])
def test_loss_curve_matches_single_process(switch, n):
    ref = tp.train(tp.Config(), STEPS)["losses"]
    assert ref[-1] < ref[0]  # it learns
    res = launch.run_ranks([os.path.join(TP, "tp_transformer.py"), "--backend", "cais",
                            "--steps", str(STEPS)], n, env={"INCA_SWITCH": switch.data_addr})
    for r in res:
        assert r["stats"]["ops_switch"] == r["stats"]["ops"] == 4 * STEPS
        for step, (got, want) in enumerate(zip(r["losses"], ref)):
            assert abs(got - want) <= RTOL * max(1.0, abs(want)), (step, got, want)


def test_megatron_tp_sp_with_ddp_matches_gloo_and_single_process(switch):
    # 4 ranks: TP 2 with sequence parallelism (reduce-scatter + all-gather), DP 2 by DDP.
    steps = 8
    ref = tp.train(tp.Config(batch=16), steps)["losses"]  # the whole batch of both DP ranks
    argv = [os.path.join(TP, "tp_transformer.py"), "--tp", "2", "--sequence-parallel",
            "--steps", str(steps), "--batch", "8"]
    gloo = launch.run_ranks(argv + ["--backend", "gloo"], 4)
    cais_ = launch.run_ranks(argv + ["--backend", "cais"], 4,
                             env={"INCA_SWITCH": switch.data_addr})
    for r in cais_:
        st = r["stats"]
        assert st["ops_switch"] == st["ops"] > 0 and st["delegated"] == 0, st
    for res in (gloo, cais_):
        for r in res:
            for step, (got, want) in enumerate(zip(r["losses"], ref)):
                assert abs(got - want) <= RTOL * max(1.0, abs(want)), (step, got, want)
    assert ref[-1] < ref[0]


def test_tp_shards_are_a_real_split():
    # A tensor-parallel rank alone (no all-reduce) must not reproduce the full model.
    full = tp.train(tp.Config(), 2)["losses"]
    half = tp.train(tp.Config(), 2, tp_rank=0, tp_size=2, group=None)["losses"]
    assert abs(full[0] - half[0]) > 1e-3


def test_benchmark_smoke_gloo_vs_cais():
    out = subprocess.run([launch.PYTHON, os.path.join(TP, "benchmark.py"), "--ranks", "2",
                          "--steps", "5", "--warmup", "1", "--smoke-ops", "100", "--hidden", "32",
                          "--ffn", "64", "--seq", "8", "--batch", "2"],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 mismatches" in out.stdout and "PASS" in out.stdout, out.stdout
    assert "cais" in out.stdout and "gloo" in out.stdout
