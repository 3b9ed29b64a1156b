"""Transparent replacement (issue 14): dropped async Works, DDP against gloo,
reduce_scatter through the switch, and the write-up's own Python lines."""
import os
import subprocess

import pytest

import cais.launch as launch
from conftest import run


def test_dropped_async_works_are_safe_on_both_apis(switch):
    # Before the fix: malloc() aborts within the first hundred iterations.
    res = run("dropped_work", 2, {"INCA_SWITCH": switch.data_addr, "ITERS": "300"})
    assert all(r["stats"]["ops_switch"] > 0 for r in res)


@pytest.mark.parametrize("n", [2, 4])
def test_reduce_scatter_every_op_and_type_through_the_switch(switch, n):
    res = run("reduce_scatter", n, {"INCA_SWITCH": switch.data_addr,
                                    "CAIS_CONTROLLER": switch.control_addr})
    assert all(r["stats"]["ops_switch"] > 0 for r in res)


def test_writeup_forms_verbatim(switch):
    res = run("writeup", 4, {"INCA_SWITCH": switch.data_addr,
                             "CAIS_CONTROLLER": switch.control_addr})
    assert all(r["switch"]["conserved"] for r in res)


def test_ddp_matches_gloo(switch):
    gloo = run("ddp", 2, {"BACKEND": "gloo"})
    cais_ = run("ddp", 2, {"BACKEND": "cais", "INCA_SWITCH": switch.data_addr})
    for g, c in zip(gloo, cais_):
        assert len(c["losses"]) == 20
        # f32 sums of two ranks are exact in any order: the same trajectory
        assert c["losses"] == pytest.approx(g["losses"], rel=1e-5, abs=1e-7)
        assert c["param_sum"] == pytest.approx(g["param_sum"], rel=1e-5)
    assert cais_[0]["losses"][-1] < cais_[0]["losses"][0]


def test_a_layer_rule_meets_tagged_traffic(switch):
    # The write-up's 4.1 form for one layer, as a policy: layer 5 of the world
    # group (id 255) runs on the host path; other layers stay on the switch.
    cli = os.path.join(launch.build_dir(), "bin", "cais-cli")
    out = subprocess.run([cli, "--device", switch.control_addr, "add-rule", "--group-id", "255",
                          "--layer-id", "5", "--op-type", "any", "--host-path"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    res = run("layers", 2, {"INCA_SWITCH": switch.data_addr})
    assert all(r["stats"]["ops_declined"] == 3 for r in res)
