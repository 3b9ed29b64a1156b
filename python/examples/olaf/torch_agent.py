"""Your own torch agent, trained asynchronously through OLAF (inca_rl.olaf).

    PYTHONPATH=build/release/python /usr/bin/python3 python/examples/olaf/torch_agent.py \
        --workers 4 --clusters 2 --updates 200 --switch auto

A policy-gradient agent (REINFORCE with a learned baseline) on inca_rl's
LunarLander-v3. The parameter server (this process's main thread) keeps the
model and an Adam optimiser; every worker (a thread with its own UDP socket,
as it would be a process on its own host) plays an episode on the newest
model it has, sends the gradient as an OLAF update, and waits up to
--model-wait-ms for a newer model (a closed loop; 0 runs free).

--switch auto starts inca-switchd --program olaf on loopback, with a cluster
table mapping each worker's port to cluster (worker mod --clusters), and the
workers send through it; --switch HOST:PORT uses one already running (its
cluster table must know the workers' ports: --worker-port-base); without
--switch the workers send straight to the PS. The last line printed is a JSON
summary: updates applied at the PS against those sent, models received, the
mean return of the first and last tenth of episodes.
"""
from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time

import numpy as np
import torch
from torch import nn

import inca_rl
from inca_rl import olaf


def make_net(hidden: int) -> nn.Module:
    torch.manual_seed(0)  # every copy starts from the same weights
    return nn.Sequential(nn.Linear(inca_rl.observation_size, hidden), nn.Tanh(),
                         nn.Linear(hidden, inca_rl.action_count + 1))  # logits + value


def flat_params(net: nn.Module) -> torch.Tensor:
    return torch.nn.utils.parameters_to_vector(net.parameters()).detach()


def episode_gradient(net: nn.Module, env, seed: int, max_steps: int, gamma: float):
    """Plays one episode; returns (flat gradient of the REINFORCE loss, return)."""
    obs, _ = env.reset(seed=seed)
    logps, values, rewards = [], [], []
    for _ in range(max_steps):
        out = net(torch.from_numpy(obs))
        dist = torch.distributions.Categorical(logits=out[:-1])
        action = dist.sample()
        obs, reward, terminated, truncated, _ = env.step(int(action))
        logps.append(dist.log_prob(action))
        values.append(out[-1])
        rewards.append(reward)
        if terminated or truncated:
            break
    returns, g = [], 0.0
    for r in reversed(rewards):
        g = r + gamma * g
        returns.append(g)
    ret = torch.tensor(returns[::-1], dtype=torch.float32) / 100.0
    values_t = torch.stack(values)
    advantage = ret - values_t.detach()
    loss = -(torch.stack(logps) * advantage).sum() + 0.5 * ((ret - values_t) ** 2).sum()
    net.zero_grad()
    loss.backward()
    grad = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
    return grad, float(sum(rewards))


def worker_main(k: int, a, peer: str, port: int, n_params: int, out: dict) -> None:
    torch.set_num_threads(1)
    net = make_net(a.hidden)
    env = inca_rl.make(seed=a.seed * 1000 + k)
    w = olaf.Worker(peer, bind=f"127.0.0.1:{port}", send_control=a.send_control,
                    delta_t_ms=a.delta_t_ms, model_elements=n_params, seed=a.seed * 1000 + k,
                    cluster=None if a.switch else k % a.clusters)
    version, returns = 0, []
    for i in range(a.updates):
        m = w.latest_model()
        if m is not None and m["version"] > version:
            torch.nn.utils.vector_to_parameters(torch.from_numpy(m["values"]), net.parameters())
            version = m["version"]
        grad, ret = episode_gradient(net, env, a.seed * 100000 + k * 1000 + i, a.max_steps,
                                     a.gamma)
        returns.append(ret)
        w.send(grad, version)
        deadline = time.monotonic() + a.model_wait_ms / 1e3
        while time.monotonic() < deadline and (w.model_version or 0) <= version:
            w.poll(min(5.0, max(0.0, (deadline - time.monotonic()) * 1e3)))
        w.poll(0)
    out[k] = {"returns": returns, **w.stats()}


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--clusters", type=int, default=2)
    p.add_argument("--updates", type=int, default=200, help="episodes (= updates) per worker")
    p.add_argument("--max-steps", type=int, default=400, help="episode cap")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--send-control", default="priority", choices=["off", "priority", "fairness"])
    p.add_argument("--delta-t-ms", type=float, default=400.0)
    p.add_argument("--model-wait-ms", type=float, default=200.0)
    p.add_argument("--switch", default="", help="auto | HOST:PORT | '' (straight to the PS)")
    p.add_argument("--worker-port-base", type=int, default=0,
                   help="with --switch HOST:PORT: worker k binds base+k (0: any free port)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    if not 1 <= a.workers <= 64 or not 1 <= a.clusters <= a.workers or a.updates < 1:
        p.error("need 1 <= --clusters <= --workers <= 64 and --updates >= 1")
    torch.set_num_threads(1)

    net = make_net(a.hidden)
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    n_params = sum(q.numel() for q in net.parameters())

    def apply(u):
        g = torch.from_numpy(u["values"])
        offset = 0
        for q in net.parameters():
            q.grad = g[offset:offset + q.numel()].view_as(q).clone()
            offset += q.numel()
        opt.step()

    ps = olaf.ParameterServer(apply, model=lambda: flat_params(net), expected_elements=n_params)
    if a.worker_port_base:
        ports = [a.worker_port_base + k for k in range(a.workers)]
    else:
        ports = [free_udp_port() for _ in range(a.workers)]
    switch, peer = None, ps.address
    if a.switch == "auto":
        from cais.launch import Switch
        table = []
        for k, port in enumerate(ports):
            table += ["--cluster", f"{port}={k % a.clusters}"]
        switch = Switch(extra=["--program", "olaf", "--ps", ps.address, "--delta-t-ms",
                               str(a.delta_t_ms)] + table)
        peer = switch.data_addr
    elif a.switch:
        peer = a.switch

    out: dict = {}
    threads = [threading.Thread(target=worker_main, args=(k, a, peer, ports[k], n_params, out))
               for k in range(a.workers)]
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            ps.poll(5)
        ps.poll(20)
    finally:
        for t in threads:
            t.join()
        if switch is not None:
            switch.stop()
    if len(out) != a.workers:
        print("a worker failed", file=sys.stderr)
        return 1
    returns = [out[k]["returns"][i] for i in range(a.updates) for k in sorted(out)]
    tenth = max(1, len(returns) // 10)
    summary = {
        "workers": a.workers,
        "through_switch": bool(a.switch),
        "worker_updates_sent": sum(out[k]["sent"] for k in out),
        "worker_updates_suppressed": sum(out[k]["suppressed"] for k in out),
        "ps_updates_applied": ps.stats()["updates_applied"],
        "worker_updates_applied": ps.stats()["worker_updates_applied"],
        "models_rx": sum(out[k]["models_rx"] for k in out),
        "acks_rx": sum(out[k]["acks_rx"] for k in out),
        "model_version": ps.model_version,
        "clusters": [c["cluster"] for c in ps.clusters()],
        "mean_return_first": float(np.mean(returns[:tenth])),
        "mean_return_last": float(np.mean(returns[-tenth:])),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
