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


def test_rank0_binds_incas_store_before_publishing_it_and_a_failure_reaches_every_rank():
    # The port is the kernel's pick and is published only once bound: no
    # other socket (the Gloo mesh's connections, in CI once) can take it in
    # between, and a peer can connect at once.
    import socket
    from datetime import timedelta

    import torch.distributed as dist
    from cais import torch_backend as tb
    store = dist.HashStore()
    store.set_timeout(timedelta(seconds=5))
    addr, server = tb._rendezvous_store(store, 0, "127.0.0.1", "127.0.0.1")
    assert addr == "127.0.0.1:%d" % server.port
    with socket.create_connection(("127.0.0.1", server.port), timeout=5):
        pass
    assert tb._rendezvous_store(store, 1, "127.0.0.1", "127.0.0.1") == (addr, None)

    # Rank 0 cannot serve (198.18.255.254 is no address of this host): it
    # raises one line, and a peer raises rank 0's reason instead of waiting
    # out the timeout.
    bad = dist.HashStore()
    bad.set_timeout(timedelta(seconds=5))
    with pytest.raises(RuntimeError, match="group rank 0 cannot serve inca's store on "
                                           "198.18.255.254: .*INCA_BIND_IP") as e0:
        tb._rendezvous_store(bad, 0, "198.18.255.254", "198.18.255.254")
    with pytest.raises(RuntimeError, match="group rank 0 could not serve inca's store: ") as e1:
        tb._rendezvous_store(bad, 1, "127.0.0.1", "127.0.0.1")
    assert "\n" not in str(e0.value) and "\n" not in str(e1.value)
