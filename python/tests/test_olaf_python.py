"""inca_rl.olaf: the Python worker and PS over the C++ transport, straight and
through a real inca-switchd --program olaf."""
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from inca_rl import olaf
import cais.launch as launch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def pump(ps, workers, done, timeout_s=10.0):
    """Polls everyone until done() or the deadline (poll waits on the socket)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out"
        ps.poll(2)
        for w in workers:
            w.poll(0)


def test_straight_to_the_ps_numpy_and_torch():
    applied = []
    params = np.arange(3000, dtype=np.float32)
    ps = olaf.ParameterServer(applied.append, model=lambda: params)
    w = olaf.Worker(ps.address, cluster=3, send_control="off", model_elements=3000)
    grad = np.linspace(-1, 1, 3000, dtype=np.float32)
    assert w.send(grad, 0)["sent"]
    # A torch tensor that requires grad, of another dtype, goes as float32.
    t = torch.linspace(1, 2, 3000, dtype=torch.float64, requires_grad=True)
    assert w.send(t * 2, 0)["datagrams"] >= 1
    pump(ps, [w], lambda: len(applied) == 2 and w.model_version == 2)
    np.testing.assert_array_equal(applied[0]["values"], grad)
    np.testing.assert_allclose(applied[1]["values"], (t * 2).detach().numpy(), rtol=1e-6)
    assert applied[0]["cluster"] == 3 and applied[0]["merged_count"] == 1
    assert applied[1]["new_model_version"] == 2
    m = w.latest_model()
    assert m["version"] == 2
    np.testing.assert_array_equal(m["values"], params)
    ack = w.last_ack
    assert ack["cluster"] == 3 and ack["model_version"] == 2 and ack["aom_ms"] is not None
    # 12,000 bytes: two UPDATE datagrams each, one ACK per datagram.
    assert w.stats()["acks_rx"] == w.stats()["datagrams_sent"] == 4
    assert w.stats()["sent"] == 2
    assert ps.stats()["updates_applied"] == 2 and ps.model_version == 2
    assert [c["cluster"] for c in ps.clusters()] == [3]


def test_through_inca_switchd_olaf():
    """Two clusters behind a real OLAF switch: its cluster table names the
    cluster, it stamps Worker_IDs and queue state, every update arrives."""
    applied = []
    # One datagram per update: a switch that merges fragments of two
    # workers' updates would leave both incomplete at a whole-update PS.
    params = np.zeros(2000, dtype=np.float32)
    ps = olaf.ParameterServer(applied.append, model=lambda: params)
    ports = [launch.free_port(socket.SOCK_DGRAM) for _ in range(3)]
    table = ["--cluster", f"{ports[0]}=0", "--cluster", f"{ports[1]}=0",
             "--cluster", f"{ports[2]}=1"]
    sw = launch.Switch(extra=["--program", "olaf", "--ps", ps.address] + table)
    try:
        workers = [olaf.Worker(sw.data_addr, bind=f"127.0.0.1:{p}", send_control="priority",
                               model_elements=2000, seed=k + 1) for k, p in enumerate(ports)]
        sent = 0
        for rnd in range(5):
            for k, w in enumerate(workers):
                sent += w.send(np.full(2000, k + rnd, dtype=np.float32), rnd)["sent"]
            # Each round waits for its updates: no congestion, nothing lost
            # (merged ones count once per worker update carried).
            pump(ps, workers, lambda: ps.stats()["worker_updates_applied"] == sent
                 and sum(w.stats()["acks_rx"] for w in workers) >= ps.stats()["updates_applied"])
        pump(ps, workers,
             lambda: ps.stats()["worker_updates_applied"] == sent
             and all(w.model_version is not None for w in workers))
    finally:
        sw.stop()
    assert sent >= 3  # the first round always goes (no feedback yet: P = 1)
    clusters = {u["worker_id"]: u["cluster"] for u in applied}
    assert sorted(set(clusters.values())) == [0, 1]
    assert 0 not in clusters  # the switch stamped every Worker_ID
    assert sorted(c["cluster"] for c in ps.clusters()) == [0, 1]
    acks = [w.last_ack for w in workers]
    # ACKs come back through the switch to the worker whose update they
    # acknowledge (its worker table), for the version the PS reached.
    assert all(a is not None and a["model_version"] >= 1 for a in acks)
    assert {a["worker_id"] for a in acks} <= set(clusters)
    assert all(0.0 <= w.send_probability <= 1.0 for w in workers)


def test_bad_input_is_a_clear_error_and_loses_nothing():
    with pytest.raises(ValueError, match="send_control"):
        olaf.Worker("127.0.0.1:9", send_control="fast")
    with pytest.raises(ValueError, match="clock"):
        olaf.Worker("127.0.0.1:9", clock="gps")
    with pytest.raises(ValueError):
        olaf.Worker("not-an-address")
    with pytest.raises(ValueError, match="model_policy"):
        olaf.ParameterServer(print, model_policy="sometimes")
    with pytest.raises(ValueError, match="model="):
        olaf.ParameterServer(print, model_policy="updated_cluster")
    with pytest.raises(ValueError, match="granularity"):
        olaf.ParameterServer(print, granularity="bytes")

    seen = []

    def apply(u):
        seen.append(u["update_id"])
        if len(seen) == 1:
            raise RuntimeError("user bug")

    ps = olaf.ParameterServer(apply)
    w = olaf.Worker(ps.address, cluster=0, send_control="off")
    with pytest.raises(ValueError):
        w.send(np.zeros(0, dtype=np.float32), 0)
    with pytest.raises(ValueError, match="timeout_ms"):
        w.poll(-1)
    w.send(np.ones(4, dtype=np.float32), 0)
    with pytest.raises(RuntimeError, match="user bug"):
        pump(ps, [w], lambda: False)
    # The PS carries on after the callback's error.
    w.send(np.ones(4, dtype=np.float32), 0)
    pump(ps, [w], lambda: len(seen) == 2)
    assert ps.stats()["updates_applied"] == 2
    with pytest.raises(ValueError, match="FailedPrecondition|peer|no"):
        olaf.ParameterServer(print).broadcast_model(np.zeros(4, dtype=np.float32))


def test_torch_agent_example_through_a_switch():
    env = dict(os.environ)
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "python", "examples", "olaf", "torch_agent.py"),
         "--workers", "3", "--clusters", "2", "--updates", "6", "--max-steps", "60",
         "--send-control", "off", "--switch", "auto"],
        env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout.strip().splitlines()[-1])
    assert s["through_switch"] and s["worker_updates_sent"] == 18
    assert s["worker_updates_applied"] == 18 and s["model_version"] == s["ps_updates_applied"]
    assert s["clusters"] == [0, 1] and s["models_rx"] >= 3
