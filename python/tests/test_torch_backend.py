"""torch.distributed backend "cais": unchanged dist code through inca-switchd, and the
switch to the host path (per process and for the whole switch)."""
import pytest

from conftest import run
import cais.launch as launch


@pytest.mark.parametrize("n", [2, 4])
def test_dist_collectives(switch, n):
    res = run("c10d", n, {"INCA_SWITCH": switch.data_addr})
    assert all(r["stats"]["ops_switch"] > 0 for r in res)


def test_set_offload_false_moves_job_to_host_path(switch):
    res = run("offload", 2, {"INCA_SWITCH": switch.data_addr, "MODE": "process"})
    # the group agrees within about switch_timeout_ms: a handful of operations
    assert all(r["ops_until_host"] <= 400 for r in res)


def test_switch_offload_threshold_1_declines_everything():
    # hosts assumed slow (1 s per collective): the controller offloads everything until the
    # threshold is raised to 1 (write-up 5.5 tip 4: one call moves every job to the host path).
    # The model alone: in measured mode the controller's one exploration of the host path
    # would decline an operation before the threshold changes.
    with launch.Switch(offload_controller="embedded",
                       extra=["--offload-host-latency-us", "1000000",
                              "--offload-measured", "false"]) as sw:
        res = run("offload", 2, {"INCA_SWITCH": sw.data_addr, "CAIS_CONTROLLER": sw.control_addr,
                                 "MODE": "switch"})
    assert all(r["stats"]["ops_declined"] > 0 for r in res)
