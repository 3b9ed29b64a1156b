"""The CAIS write-up's benchmark (4.3) and smoke test (5.5 tip 1), gloo vs cais, in one run.

    PYTHONPATH=build/release/python /usr/bin/python3 python/examples/tp/benchmark.py --ranks 4

Starts inca-switchd on loopback (unless --switch HOST:PORT), spawns the ranks; every
rank builds a gloo group and a cais group, then:
  1. smoke test: 100 all-reduces of random float32 tensors (random sizes) on both
     groups, results compared (the only difference allowed is summation order);
  2. for each backend, the tensor-parallel block of tp_transformer.py trained for
     --steps steps (after --warmup): average and p99 step time and the fraction of
     the step spent in the block's collectives. --tp T (default: all ranks) with
     data parallelism by DDP over the rest, --sequence-parallel for Megatron's
     reduce-scatter/all-gather form.
Rank 0 prints the table and one JSON line.

Multi-host, as torchrun users expect: with RANK set (and WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, INCA_SWITCH, INCA_BIND_IP, GLOO_SOCKET_IFNAME) the script runs as that
one rank, on any machine; rank 0 prints. On the testbed (docs/testbed.md, as root):

    /usr/bin/python3 python/examples/tp/benchmark.py --testbed 4 --rate 1gbit

builds a star of network namespaces, starts inca-switchd in the switch's and one
rank per host namespace, then tears it all down.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def rank_main(a) -> dict:
    import torch
    import torch.distributed as dist
    sys.path.insert(0, HERE)
    import cais  # noqa: F401  registers the "cais" backend
    import tp_transformer as tp
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    groups = {"gloo": dist.new_group(backend="gloo"), "cais": dist.new_group(backend="cais")}
    # 1. smoke test
    g = torch.Generator().manual_seed(99)
    mismatches, max_rel = 0, 0.0
    for i in range(a.smoke_ops):
        size = int(torch.randint(1, 50000, (1,), generator=g))
        base = torch.randn(n, size, generator=g)
        outs = {}
        for be, grp in groups.items():
            t = base[rank].clone()
            dist.all_reduce(t, group=grp)
            outs[be] = t
        want = base.sum(0)
        rel = float(((outs["cais"] - outs["gloo"]).abs() / (want.abs() + 1e-3)).max())
        max_rel = max(max_rel, rel)
        if not torch.allclose(outs["cais"], outs["gloo"], rtol=1e-5, atol=1e-5):
            mismatches += 1
    # 2. step times per backend, same model and batches
    cfg = tp.Config(a.hidden, a.heads, a.ffn, a.seq, a.batch)
    res = {"smoke": {"ops": a.smoke_ops, "mismatches": mismatches, "max_rel_diff": max_rel}}
    tp_size = a.tp or n
    for be, grp in groups.items():
        if tp_size == n:
            tp_group, tp_rank, dp_group, dp_rank, dp_size = grp, rank, None, 0, 1
        else:
            tp_group, tp_rank, dp_group, dp_rank, dp_size = tp.make_groups(tp_size, be)
        r = tp.train(cfg, a.warmup + a.steps, tp_rank, tp_size, tp_group,
                     barrier=lambda grp=grp: dist.barrier(group=grp), sp=a.sequence_parallel,
                     dp_rank=dp_rank, dp_size=dp_size, dp_group=dp_group)
        times = sorted(r["times"][a.warmup:])
        comm = r["comm"][a.warmup:]
        res[be] = {
            "avg_s": sum(times) / len(times),
            "p99_s": times[min(len(times) - 1, int(len(times) * 0.99))],
            "comm_fraction": sum(comm) / sum(r["times"][a.warmup:]),
            "final_loss": r["losses"][-1],
        }
    res["cais"]["client"] = groups["cais"].stats()
    dist.destroy_process_group()
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--smoke-ops", type=int, default=100)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tp", type=int, default=0, help="tensor-parallel degree (default: --ranks)")
    ap.add_argument("--sequence-parallel", action="store_true")
    ap.add_argument("--switch", help="use this inca-switchd (HOST:PORT) instead of starting one")
    ap.add_argument("--testbed", type=int, metavar="HOSTS",
                    help="run on a testbed of HOSTS namespaces, one rank each (root)")
    ap.add_argument("--rate", default="1gbit", help="testbed host links, each way")
    ap.add_argument("--rank-process", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank_process:
        print(json.dumps(rank_main(a)), flush=True)
        return
    t0 = time.time()
    if "RANK" in os.environ:  # one rank of a job launched elsewhere
        res = rank_main(a)
        if int(os.environ["RANK"]) != 0:
            return
        a.ranks = int(os.environ.get("WORLD_SIZE", "1"))
    elif a.testbed:
        a.ranks = a.testbed
        res = on_testbed(a)
    else:
        from cais import launch
        # Several groups (TP and DP) share the switch's slots, which its default
        # (128 pending chunks, switch-wide: the write-up's value) cannot hold for
        # windows of 64 chunks per rank; per-group shares are issue 18's.
        sw = None if a.switch else launch.Switch(extra=["--max-pending-chunks", "2048"])
        try:
            argv = [os.path.abspath(__file__), "--rank-process"] + sys.argv[1:]
            env = {"INCA_SWITCH": a.switch or sw.data_addr}
            res = launch.run_ranks(argv, a.ranks, env=env, timeout_s=max(300, a.steps * 10))[0]
        finally:
            if sw:
                sw.stop()
    res["ranks"], res["wall_s"] = a.ranks, time.time() - t0
    report(a, res)


def on_testbed(a) -> dict:
    """Every rank in its own host namespace of a fresh testbed, the switch in
    the switch namespace; torn down afterwards (also on failure)."""
    sys.path.append(os.path.join(HERE, "..", ".."))  # python/: the inca_testbed package
    from inca_testbed import net as testbed
    from cais import launch
    testbed.require_root()
    shape = testbed.LinkShape(rate=a.rate, burst="256kb", latency="20ms")
    tb = testbed.Testbed("tp%d" % (os.getpid() % 100000), hosts=a.testbed, shape=shape,
                         owner_pid=os.getpid())
    with tb:
        with launch.Switch(host=tb.switch_ip, wrap=["ip", "netns", "exec", tb.switch_ns],
                           extra=["--max-pending-chunks", "2048"]) as sw:
            # the ranks ignore --testbed and --rate
            argv = [os.path.abspath(__file__), "--rank-process"] + sys.argv[1:]
            return launch.run_ranks(
                argv, a.testbed, env={"INCA_SWITCH": sw.data_addr, "MASTER_ADDR": tb.host_ip(0),
                                      "GLOO_SOCKET_IFNAME": "eth0"},
                wrap=lambda r: ["ip", "netns", "exec", tb.host_ns(r)],
                rank_env=lambda r: {"INCA_BIND_IP": tb.host_ip(r)},
                timeout_s=max(300, a.steps * 10))[0]


def report(a, res: dict) -> None:
    s = res["smoke"]
    print("smoke test (write-up 5.5 tip 1): %d random all-reduces, gloo vs cais: %d mismatches, "
          "max relative difference %.2g -> %s" % (s["ops"], s["mismatches"], s["max_rel_diff"],
                                                 "PASS" if s["mismatches"] == 0 else "FAIL"))
    where = " on a testbed of %d hosts at %s" % (a.testbed, a.rate) if a.testbed else ""
    print("TP block hidden=%d ffn=%d seq=%d batch=%d, %d ranks (TP %d%s, DP %d), %d steps%s:" % (
        a.hidden, a.ffn, a.seq, a.batch, a.ranks, a.tp or a.ranks,
        " with sequence parallelism" if a.sequence_parallel else "",
        a.ranks // (a.tp or a.ranks), a.steps, where))
    print("%-8s %12s %12s %14s" % ("backend", "avg step", "p99 step", "comm fraction"))
    for be in ("gloo", "cais"):
        r = res[be]
        print("%-8s %10.2f ms %10.2f ms %13.1f%%" % (be, r["avg_s"] * 1e3, r["p99_s"] * 1e3,
                                                   r["comm_fraction"] * 100))
    c = res["cais"]["client"]
    print("cais: %d of %d operations through the switch" % (c["ops_switch"], c["ops"]))
    print(json.dumps(res))
    if s["mismatches"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
