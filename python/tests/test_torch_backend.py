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


def test_store_port_is_drawn_below_the_ephemeral_range_and_skips_a_taken_one():
    # Group rank 0 publishes the port before binding it: a port from bind(0)
    # is an ephemeral one, which the Gloo mesh's connections could take first.
    import random
    import socket

    from cais import torch_backend as tb
    lo, _ = tb._ephemeral_ports()
    port = tb._free_port("127.0.0.1", random.Random(1))
    assert max(1024, lo - 16384) <= port < lo
    assert tb._bindable("127.0.0.1", port)
    # Hold the first port a seeded draw would give: the next draw is taken instead.
    for seed in range(100):
        first = random.Random(seed).randrange(max(1024, lo - 16384), lo)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
            try:
                held.bind(("127.0.0.1", first))
            except OSError:
                continue
            held.listen()
            got = tb._free_port("127.0.0.1", random.Random(seed))
            assert got != first and got < lo
            return
    raise AssertionError("no seed's first port was free to hold")
