"""One rank of a multi-process test: `rank_worker.py SCENARIO`, run by
cais.launch.run_ranks with RANK/WORLD_SIZE/MASTER_* and INCA_SWITCH /
CAIS_CONTROLLER set. Prints one JSON line; any failed check raises (rc != 0)."""

import json
import os
import sys
import time
import warnings

import numpy as np

import cais


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def scenario_api():
    import torch
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    cais.configure({"switch_timeout_ms": 5000, "chunk_size": 1452})  # before init: client keys
    cais.init(controller_addr=os.environ["CAIS_CONTROLLER"])
    eff = cais.configure({"timeout_ms": 5000, "offload_threshold": 0.3, "sram_usage_limit": 0.75,
                          "advise_window": True})
    check(abs(eff["offload_threshold"] - 0.3) < 1e-9, "switch config not applied: %r" % eff)
    check(eff["advise_window"] is True, "a bool switch setting reads back as a bool: %r" % eff)
    tp = cais.new_group(ranks=list(range(n)), group_id=0)

    # numpy float32 sum, exact integer values, several chunks (1452-byte chunks)
    a = (np.arange(10000, dtype=np.float32) % 7 - 3) * (rank + 1)
    want = (np.arange(10000, dtype=np.float32) % 7 - 3) * sum(range(1, n + 1))
    out = cais.all_reduce(a, group=tp)
    check(out is a and np.array_equal(a, want), "numpy f32 sum")
    # torch int32 max/min/product
    t = torch.arange(100, dtype=torch.int32) + rank
    cais.all_reduce(t, op=cais.ReduceOp.MAX, group=tp)
    check(torch.equal(t, torch.arange(100, dtype=torch.int32) + n - 1), "i32 max")
    t = torch.full((33,), rank + 1, dtype=torch.int32)
    cais.all_reduce(t, op="min", group=tp)
    check(bool((t == 1).all()), "i32 min")
    t = torch.full((5,), 2.0)
    cais.all_reduce(t, op=cais.ReduceOp.PRODUCT, group=tp)
    check(bool((t == 2.0 ** n).all()), "f32 product")
    # bf16 and f16
    for dt in (torch.bfloat16, torch.float16):
        t = torch.full((4097,), float(rank + 1), dtype=dt)
        cais.all_reduce(t, group=tp)
        check(bool((t.float() == n * (n + 1) / 2).all()), "%s sum" % dt)
    # all_gather, broadcast
    g = cais.all_gather(np.full((3, 2), rank, dtype=np.int32), group=tp)
    check(g.shape == (n, 3, 2) and all((g[r] == r).all() for r in range(n)), "all_gather")
    b = torch.full((1000,), float(rank))
    cais.broadcast(b, src=1, group=tp)
    check(bool((b == 1.0).all()), "broadcast")
    # async handles
    ts = [torch.full((2048,), float(rank + i)) for i in range(4)]
    works = [cais.all_reduce(x, group=tp, async_op=True) for x in ts]
    for i, w in enumerate(works):
        r = w.wait()
        check(r is ts[i] and bool((r == sum(k + i for k in range(n))).all()), "async %d" % i)
    wg = cais.all_gather(torch.tensor([rank], dtype=torch.float32), group=tp, async_op=True)
    check(wg.wait().flatten().tolist() == list(map(float, range(n))), "async all_gather")
    # non-contiguous: copy + warning, result written back
    m = torch.ones(8, 6) * (rank + 1)
    view = m[:, ::2]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cais.all_reduce(view, group=tp)
    check(any(issubclass(w.category, cais.CaisWarning) for w in caught), "no CaisWarning")
    s = n * (n + 1) / 2
    check(bool((m[:, ::2] == s).all()) and bool((m[:, 1::2] == rank + 1).all()), "non-contig")
    # the implicit world group, and a subgroup of ranks 0 and 1
    w = np.ones(17, dtype=np.float32)
    cais.all_reduce(w)
    check(bool((w == n).all()), "world group")
    sub = cais.new_group(ranks=[0, 1], group_id=1)
    if rank in (0, 1):
        x = np.full(9, rank + 1, dtype=np.int32)
        cais.all_reduce(x, group=sub)
        check(bool((x == 3).all()), "subgroup")
    else:
        check(sub is None, "non-member gets None")
    # errors are exceptions that say what to do
    for bad, exc, words in [(np.zeros(3, dtype=np.float64), ValueError, "float32"),
                            ([1, 2], TypeError, "numpy")]:
        try:
            cais.all_reduce(bad, group=tp)
        except exc as e:
            check(words in str(e), "message %r lacks %r" % (str(e), words))
        else:
            raise AssertionError("no %s for %r" % (exc.__name__, bad))
    ro = np.zeros(3, dtype=np.float32)
    ro.flags.writeable = False
    try:
        cais.all_reduce(ro, group=tp)
        raise AssertionError("read-only accepted")
    except ValueError as e:
        check("read-only" in str(e), str(e))
    cais.synchronize()
    st = cais.stats(tp)
    check(st["ops_switch"] > 0, "nothing went through the switch: %r" % st)
    # The dict is its declaration's (kCommunicatorStatsFields): same keys, in order.
    check(list(st) == list(cais._cais.stats_help()), "stats keys %r" % list(st))
    sw = cais.switch_stats()
    check(sw["completed_chunks"] > 0 and sw["conserved"], "switch stats %r" % sw)
    # Every counters table rides along, named by its declaration.
    check(sw["cais"]["completed_chunks"] == sw["completed_chunks"]
          and sw["program"]["rx_packets"] == sw["rx_packets"]
          and sw["host"]["datagrams_rx"] >= sw["rx_packets"]
          and "groups_formed" in sw["switch_counters"]
          and sw["shards"] == [], "switch counters %r" % sw)  # one shard: no list
    cais.shutdown()
    return {"stats": st}


def scenario_c10d():
    import torch
    import torch.distributed as dist
    cais.configure({"switch_timeout_ms": 5000})
    dist.init_process_group("cais")
    rank, n = dist.get_rank(), dist.get_world_size()
    check(dist.get_backend() == "cais", "backend %r" % dist.get_backend())
    t = torch.arange(10000, dtype=torch.float32) % 5 * (rank + 1)
    dist.all_reduce(t)
    check(torch.equal(t, torch.arange(10000, dtype=torch.float32) % 5 * (n * (n + 1) / 2)), "sum")
    t = torch.tensor([rank], dtype=torch.float32)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    check(t.item() == n - 1, "max")
    # delegated to Gloo: int64 and reduce_scatter-free ops
    i = torch.tensor([rank], dtype=torch.int64)
    dist.all_reduce(i)
    check(i.item() == n * (n - 1) // 2, "int64 via gloo")
    outs = [torch.empty(3) for _ in range(n)]
    dist.all_gather(outs, torch.full((3,), float(rank)))
    check(all(bool((o == r).all()) for r, o in enumerate(outs)), "all_gather")
    flat = torch.empty(n * 2)
    dist.all_gather_into_tensor(flat, torch.full((2,), float(rank))) \
        if hasattr(dist, "all_gather_into_tensor") else dist._all_gather_base(flat, torch.full((2,), float(rank)))
    check(flat.tolist() == [float(r) for r in range(n) for _ in range(2)], "allgather base")
    b = torch.full((5,), float(rank))
    dist.broadcast(b, src=n - 1)
    check(bool((b == n - 1).all()), "broadcast")
    # non-contiguous through a copy
    m = torch.ones(4, 6)
    dist.all_reduce(m.t())
    check(bool((m == n).all()), "transposed")
    # async
    w = dist.all_reduce(torch.ones(100), async_op=True)
    w.wait()
    dist.barrier()
    # a subgroup with the same backend
    sub = dist.new_group(ranks=[0, 1])
    if rank in (0, 1):
        x = torch.ones(7)
        dist.all_reduce(x, group=sub)
        check(bool((x == 2).all()), "subgroup")
    # int64/float64 broadcast and all_gather move words, not sums: through inca
    pg = dist.distributed_c10d._get_default_group()
    before = pg.stats()["delegated"]
    big = torch.arange(5, dtype=torch.int64) * (rank + 1) * 2 ** 40
    dist.broadcast(big, src=0)
    check(torch.equal(big, torch.arange(5, dtype=torch.int64) * 2 ** 40), "int64 broadcast")
    parts = [torch.empty(3, dtype=torch.float64) for _ in range(n)]
    dist.all_gather(parts, torch.full((3,), rank + 0.1, dtype=torch.float64))
    check(all(bool((p == r + 0.1).all()) for r, p in enumerate(parts)), "float64 all_gather")
    check(pg.stats()["delegated"] == before, "words were delegated: %r" % pg.stats())
    st = pg.stats()
    check(st["ops_switch"] > 0 and st["delegated_by_op"].get("allreduce") == 1, "stats %r" % st)
    dist.destroy_process_group()
    return {"stats": st}


def scenario_offload():
    """Runs all-reduces until the host path takes over (MODE=process: this process calls
    cais.set_offload(False); MODE=switch: rank 0 sets offload_threshold=1 on the switch),
    bounded in count; every result is checked."""
    import torch
    import torch.distributed as dist
    mode = os.environ["MODE"]
    if mode == "switch":
        cais.init(controller_addr=os.environ["CAIS_CONTROLLER"])
    cais.configure({"switch_timeout_ms": 5000})
    dist.init_process_group("cais")
    rank, n = dist.get_rank(), dist.get_world_size()
    pg = dist.distributed_c10d._get_default_group()
    want = n * (n + 1) / 2

    def op():
        t = torch.full((3000,), float(rank + 1))
        dist.all_reduce(t)
        check(bool((t == want).all()), "result")
    for _ in range(5):
        op()
    before = pg.stats()
    check(before["ops_switch"] >= 5, "warm-up did not use the switch: %r" % before)
    t0 = time.monotonic()
    if mode == "process":
        cais.set_offload(False)
    elif rank == 0:
        cais.configure({"offload_threshold": 1})
    key = "ops_host"
    switched_after = None
    for i in range(400):
        op()
        st = pg.stats()
        flag = torch.tensor([1.0 if st[key] > before[key] else 0.0])
        dist.all_reduce(flag, op=dist.ReduceOp.MIN)  # every rank sees the host path
        if flag.item() == 1.0:
            switched_after = i + 1
            break
    elapsed = time.monotonic() - t0
    check(switched_after is not None, "host path never took over: %r" % pg.stats())
    mid = pg.stats()
    for _ in range(5):
        op()
    after = pg.stats()
    check(after["ops_switch"] == mid["ops_switch"], "switch still used: %r" % after)
    dist.destroy_process_group()
    return {"ops_until_host": switched_after, "seconds": elapsed, "stats": after}


def scenario_dropped_work():
    """Async operations whose Work is dropped at once, on both APIs (the
    heap corruption of issue 14): buffers must outlive the operation."""
    import gc
    import torch
    import torch.distributed as dist
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    iters = int(os.environ.get("ITERS", "300"))
    cais.configure({"switch_timeout_ms": 5000})
    dist.init_process_group("cais")
    for i in range(iters):
        dist.all_reduce(torch.ones(2 + i % 3), async_op=True)  # dropped at once
        dist.all_reduce(torch.ones(3000).t()[::2], async_op=True)  # non-contiguous copy
        if i % 50 == 0:
            gc.collect()
    keep = torch.full((5000,), float(rank))
    dist.all_reduce(keep, async_op=True)  # dropped, but the tensor is ours
    dist.barrier()
    check(bool((keep == n * (n - 1) / 2).all()), "dropped work's tensor has its result")
    pg = dist.distributed_c10d._get_default_group()
    st = pg.stats()
    check(st["ops_switch"] >= 2 * iters, "not through the switch: %r" % st)
    dist.destroy_process_group()

    cais.init()
    g = cais.new_group(group_id=3)
    for i in range(iters):
        w = cais.all_reduce(torch.ones(2), group=g, async_op=True)
        del w
        cais.all_gather(np.ones(7, dtype=np.float32), group=g, async_op=True)
        cais.reduce_scatter(torch.ones(4 * n), group=g, async_op=True)
        v = torch.ones(64, 8)[:, ::4]
        cais.all_reduce(v, group=g, async_op=True)  # non-contiguous: written back later
        del v
    m = torch.ones(16, 4) * (rank + 1)
    cais.all_reduce(m[:, ::2], group=g, async_op=True)
    cais.synchronize(g)
    check(bool((m[:, ::2] == n * (n + 1) / 2).all()) and bool((m[:, 1::2] == rank + 1).all()),
          "dropped non-contiguous work was written back")
    st = cais.stats(g)
    cais.shutdown()
    return {"stats": st}


def scenario_reduce_scatter():
    """reduce_scatter for every op and type at odd sizes, on both APIs."""
    import torch
    import torch.distributed as dist
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    cais.configure({"switch_timeout_ms": 5000, "chunk_size": 1452})
    cais.init(controller_addr=os.environ.get("CAIS_CONTROLLER"))
    g = cais.new_group(group_id=0)
    sizes = [1, 7, 363, 1000, 20011]  # elements per rank: inside one chunk, odd, many chunks
    types = {torch.float32: 1e-6, torch.float16: 1e-2, torch.bfloat16: 5e-2, torch.int32: 0}
    for k in sizes:
        for dt, tol in types.items():
            base = (torch.arange(n * k) % 5 + 1).to(dt)
            for op, fn in [(cais.ReduceOp.SUM, lambda x: x * sum(r + 1 for r in range(n))),
                           (cais.ReduceOp.MAX, lambda x: x * n),
                           (cais.ReduceOp.MIN, lambda x: x),
                           (cais.ReduceOp.PRODUCT, None)]:
                if op == cais.ReduceOp.PRODUCT:
                    x = torch.full((n * k,), 2 if rank % 2 == 0 else 1).to(dt)
                    want = torch.full((k,), 2 ** ((n + 1) // 2)).to(dt)
                else:
                    x = base * (rank + 1)
                    want = fn(base.double()).to(dt).double()[rank * k:(rank + 1) * k]
                out = cais.reduce_scatter(x, op=op, group=g)
                check(out.shape == (k,), "shape %r" % (out.shape,))
                err = (out.double() - want.double()).abs().max().item()
                check(err <= tol * max(1.0, want.double().abs().max().item()),
                      "reduce_scatter %s %s k=%d err=%g" % (op.name, dt, k, err))
    # numpy, 2-D, the stacked form
    a = np.ones((2 * n, 3), dtype=np.float32) * (rank + 1)
    r = cais.reduce_scatter(a, group=g)
    check(r.shape == (2, 3) and (r == n * (n + 1) / 2).all(), "numpy 2-D")
    st = cais.stats(g)
    check(st["ops_switch"] > 0 and st["ops_host"] == 0, "not through the switch: %r" % st)
    cais.shutdown()
    # torch.distributed: reduce_scatter (list) and _reduce_scatter_base
    dist.init_process_group("cais")
    outs = torch.empty(5)
    ins = [torch.full((5,), float(rank + 10 * j)) for j in range(n)]
    dist.reduce_scatter(outs, ins)
    check(bool((outs == sum(r + 10 * rank for r in range(n))).all()), "dist.reduce_scatter")
    flat = torch.arange(n * 9, dtype=torch.float32) * (rank + 1)
    o = torch.empty(9)
    dist._reduce_scatter_base(o, flat)
    want = torch.arange(n * 9, dtype=torch.float32)[rank * 9:(rank + 1) * 9] * (n * (n + 1) / 2)
    check(torch.equal(o, want), "_reduce_scatter_base")
    # coalesced all-reduce through inca, not delegated
    ts = [torch.full((3,), float(rank)), torch.full((1000,), 1.0), torch.ones(2, 2)]
    dist.all_reduce_coalesced(ts)
    check(bool((ts[0] == n * (n - 1) / 2).all()) and bool((ts[1] == n).all())
          and bool((ts[2] == n).all()), "all_reduce_coalesced")
    pg = dist.distributed_c10d._get_default_group()
    st = pg.stats()
    check(st["delegated"] == 0, "delegated to Gloo: %r" % st)
    # a delegated call is counted by name
    dist.all_reduce(torch.ones(3, dtype=torch.float64))
    st = pg.stats()
    check(st["delegated_by_op"] == {"allreduce": 1}, "delegated_by_op %r" % st)
    del pg
    dist.destroy_process_group()
    # Destroyed now, with its delegated Gloo group, while the peers are
    # there: not at interpreter exit, where a Gloo worker thread releasing a
    # tensor took the GIL during finalization and aborted the process.
    import gc
    gc.collect()
    import cais.torch_backend as tb
    check(len(tb._groups) == 0, "process group outlived destroy_process_group()")
    return {"stats": st}


def scenario_writeup():
    """The write-up's Python lines from 3.4 and 4.2, as written."""
    import torch
    cais.init(controller_addr=os.environ["CAIS_CONTROLLER"])
    # 4.2 (its dict verbatim)
    cais_config = {
        "chunk_size": 65536,  # 64KB
        "offload_threshold": 0.2,
        "timeout_ms": 50,
        "max_pending_chunks": 128,
        "sram_usage_limit": 0.75,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        eff = cais.configure(cais_config)
    check(any("chunk_size 65536" in str(w.message) for w in caught), "no clamp warning")
    check(eff["chunk_size"] == 8952, "chunk_size in effect %r" % eff)
    check(eff["max_pending_chunks"] == 128 and abs(eff["timeout_ms"] - 50) < 1e-9
          and abs(eff["offload_threshold"] - 0.2) < 1e-9
          and abs(eff["sram_usage_limit"] - 0.75) < 1e-9, "switch settings %r" % eff)
    # 3.4
    tp_group = cais.new_group(ranks=[0, 1, 2, 3], group_id=0)
    partial_result = torch.full((50000,), float(cais.get_rank() + 1))
    reduced = cais.all_reduce(partial_result, group=tp_group)
    check(bool((reduced == 10).all()), "all_reduce(group=tp_group)")
    t = torch.ones(1000)
    cais.all_reduce(t, group_id=0)
    check(bool((t == 4).all()), "all_reduce(group_id=0)")
    u = torch.ones(10)
    cais.all_reduce(u, group_id=7)  # a group id nobody created: all ranks, created here
    check(bool((u == 4).all()), "all_reduce(group_id=7)")
    cais.synchronize()
    st = cais.stats(tp_group)
    check(st["ops_switch"] >= 2 and st["ops_host"] == 0, "stats %r" % st)
    sw = cais.switch_stats()
    cais.shutdown()
    return {"stats": st, "switch": {k: sw[k] for k in ("completed_chunks", "conserved")}}


def scenario_tagged():
    """A few operations with layer tags, for the capture test."""
    import torch
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    cais.init()
    with cais.layer(5):
        t = torch.full((5000,), float(rank + 1))
        cais.all_reduce(t)
    check(bool((t == n * (n + 1) / 2).all()), "tagged all_reduce")
    out = cais.reduce_scatter(torch.ones(4 * n * 1000), layer_id=9)
    check(bool((out == n).all()), "tagged reduce_scatter")
    st = cais.stats()
    check(st["ops_switch"] == 2, "stats %r" % st)
    cais.shutdown()
    return {"stats": st}


def scenario_layers():
    """Layer 5 is pinned to the host path by a rule (the test adds it): its
    operations are declined, layer 7's go through the switch; all exact."""
    import torch
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    cais.configure({"switch_timeout_ms": 5000})
    cais.init()
    for layer in (5, 7, 5, 7, 5, 7):
        t = torch.full((20000,), float(rank + layer))
        cais.all_reduce(t, layer_id=layer)
        check(bool((t == sum(r + layer for r in range(n))).all()), "layer %d result" % layer)
    st = cais.stats()
    check(st["ops_declined"] == 3 and st["ops_switch"] == 3, "stats %r" % st)
    # Why (issue 46): the layer's rule, for the class of 80,000 bytes (64 KiB up).
    check(st["host_reasons"] == {"rule": 3}, "host reasons %r" % st["host_reasons"])
    check(st["host_by_class"] == {"64 KiB": {"rule": 3}}, "by class %r" % st["host_by_class"])
    cais.shutdown()
    return {"stats": st}


def scenario_testbed():
    """One rank per host namespace: exact all-reduce and reduce-scatter of a few
    MiB through the switch, then on the host path alone (INCA_SWITCH=none)."""
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    count = int(os.environ.get("COUNT", str(1 << 19)))  # 2 MiB of f32
    out = {}
    try:
        cais.configure({"competitive": 1})
        check(False, "competitive=1 accepted")
    except ValueError:
        pass
    competitive = os.environ.get("COMPETITIVE") == "1"
    for phase, (backend, switch) in enumerate((("switch", None), ("host", "none"))):
        # join_timeout_ms: under 1 % loss a rank's TCP connects (store, Gloo)
        # can take two SYN timeouts (1 + 2 s) longer than its peers', and a
        # rank whose switch join gives up first runs the phase on the host
        # path (seen once in CI: ops_switch 0, rejoins 1).
        options = {"switch_timeout_ms": 5000, "join_timeout_ms": 15000, "competitive": competitive}
        if os.environ.get("CHUNK_SIZE"):  # e.g. what an IPv6 datagram carries in one MTU
            options["chunk_size"] = int(os.environ["CHUNK_SIZE"])
        cais.configure(options)
        # Each phase on its own store port: rank 0's store of the first phase
        # may still be closing when a fast peer connects for the second.
        cais.init(switch_addr=switch, master_port=int(os.environ["MASTER_PORT"]) + 100 * phase)
        t0 = time.monotonic()
        for it in range(3):
            a = (np.arange(count, dtype=np.float32) % 13 - 6) * (rank + 1 + it)
            cais.all_reduce(a)
            want = (np.arange(count, dtype=np.float32) % 13 - 6) * sum(r + 1 + it for r in range(n))
            check(np.array_equal(a, want), "%s all_reduce %d" % (backend, it))
        x = np.ones((n * 1000, 16), dtype=np.float32) * (rank + 1)
        r = cais.reduce_scatter(x)
        check(r.shape == (1000, 16) and (r == n * (n + 1) / 2).all(), "%s reduce_scatter" % backend)
        st = cais.stats()
        out[backend] = {"stats": st, "seconds": time.monotonic() - t0}
        cais.shutdown()
    check(out["switch"]["stats"]["ops_switch"] > 0, "nothing through the switch: %r" % out)
    check(out["switch"]["stats"]["window_chunks"] >= 1, "no window in stats: %r" % out)
    return out


def scenario_tree():
    """One rank of a group spread over the leaves of a tree of switches
    (INCA_SWITCH = its leaf, INCA_BIND_IP = its host's address): the
    aggregation manager builds the tree from the ranks' JOINs. Every
    collective goes through the tree exact: all-reduces (f32 sum over
    several chunks, i32 max, bf16), a reduce-scatter and an all-gather
    whose blocks differ by rank (so a block at the wrong rank shows), a
    broadcast from the last rank."""
    import torch
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    cais.configure({"join_timeout_ms": 15000, "switch_timeout_ms": 5000})
    cais.init()
    for it, count in enumerate((1000, 200000)):
        a = (np.arange(count, dtype=np.float32) % 13 - 6) * (rank + 1 + it)
        cais.all_reduce(a)
        want = (np.arange(count, dtype=np.float32) % 13 - 6) * sum(r + 1 + it for r in range(n))
        check(np.array_equal(a, want), "f32 sum of %d" % count)
    t = torch.arange(5000, dtype=torch.int32) * (rank + 1)
    cais.all_reduce(t, op=cais.ReduceOp.MAX)
    check(torch.equal(t, torch.arange(5000, dtype=torch.int32) * n), "i32 max")
    t = torch.full((3000,), float(rank + 1), dtype=torch.bfloat16)
    cais.all_reduce(t)
    check(bool((t.float() == n * (n + 1) / 2).all()), "bf16 sum")
    # Block b of rank q's input: (q + 1) * (b + 1) + row, so rank r's block
    # of the sum is (r + 1) * n(n + 1)/2 + n * row (several chunks a block).
    rows = np.arange(3000, dtype=np.float32)[:, None] * np.ones((1, 4), dtype=np.float32)
    x = np.concatenate([(rank + 1) * (b + 1) + rows for b in range(n)])
    r = cais.reduce_scatter(x)
    check(r.shape == (3000, 4) and np.array_equal(r, (rank + 1) * n * (n + 1) / 2 + n * rows),
          "reduce_scatter")
    g = cais.all_gather(np.arange(5000, dtype=np.int32) + 10000 * rank)
    check(all(np.array_equal(g[q], np.arange(5000, dtype=np.int32) + 10000 * q)
              for q in range(n)), "all_gather")
    b = np.arange(7000, dtype=np.float32) * (rank + 1)
    cais.broadcast(b, src=n - 1)
    check(np.array_equal(b, np.arange(7000, dtype=np.float32) * n), "broadcast")
    st = cais.stats()
    cais.shutdown()
    return {"rank": rank, "stats": st}


def scenario_ddp():
    """An unmodified DDP training loop; prints its losses (compared with gloo's by the test)."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    backend = os.environ["BACKEND"]
    if backend == "cais":
        cais.configure({"switch_timeout_ms": 5000})
    dist.init_process_group(backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))
    ddp = DDP(model, bucket_cap_mb=0.01)  # several buckets
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + rank)
    losses = []
    for _ in range(20):
        x = torch.randn(16, 32, generator=gen)
        y = x[:, :4].sin()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t)
        losses.append(t.item() / n)
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    out = {"losses": losses, "param_sum": float(params.double().sum())}
    if backend == "cais":
        st = dist.distributed_c10d._get_default_group().stats()
        check(st["ops_switch"] > 0 and st["delegated"] == 0, "DDP not all through inca: %r" % st)
        out["stats"] = st
    # What torch's own examples do before tearing down: drop the DDP reducer's
    # hold on the group and meet at a barrier, so no rank destroys the group
    # while its peer still talks to it (Gloo's teardown can hang otherwise,
    # pytorch/pytorch#75097; CI saw rank 0 of the gloo baseline hang here once).
    del ddp, opt
    dist.barrier()
    dist.destroy_process_group()
    return out


def _disagreements(rank, n, api):
    """The disagreement matrix of issue 46 for one API: each case runs an operation the
    ranks disagree on, records the error, then a correct all-reduce that must be exact."""
    import torch
    f32 = lambda k, v=1.0: torch.full((k,), float(v))  # noqa: E731
    cases = [
        ("count", lambda: api["all_reduce"](f32(1000 if rank == 0 else 2000))),
        ("dtype", lambda: api["all_reduce"](
            torch.ones(1000, dtype=torch.int32 if rank == 1 else torch.float32))),
        ("op", lambda: api["all_reduce"](f32(1000), "max" if rank == 1 else "sum")),
        ("collective", lambda: api["broadcast"](f32(1000), 0) if rank == 1
         else api["all_reduce"](f32(1000))),
        ("root", lambda: api["broadcast"](f32(1000, rank), 1 if rank == 1 else 0)),
        ("count", lambda: api["all_reduce"](f32(0 if rank == 1 else 1000))),
    ]
    if "layer" in api:
        cases.append(("layer", lambda: api["layer"](3 if rank == 1 else 4)))
    if "delegated" in api:
        # The torch backend hands f64/i64 sums and BAND to Gloo: a rank that
        # delegates while its peers run inca, and ranks that all delegate but disagree.
        red = api["delegated"]
        cases += [
            ("dtype", lambda: red(torch.ones(1000, dtype=torch.float64 if rank == 0
                                             else torch.float32), "sum")),
            ("count", lambda: red(torch.ones(2000 if rank == 1 else 1000,
                                             dtype=torch.int64), "sum")),
            ("op", lambda: red(torch.ones(1000, dtype=torch.int32),
                               "band" if rank == 1 else "sum")),
        ]
    errors = []
    for field, fn in cases:
        try:
            fn()
            errors.append("no error")
        except (ValueError, RuntimeError) as e:
            msg = str(e)
            check("\n" not in msg.strip(), "a multi-line error: %r" % msg)
            check("the ranks disagree on " + field in msg, "%s not named in %r" % (field, msg))
            errors.append(msg[msg.index("the ranks disagree"):])
        t = torch.arange(3000, dtype=torch.float32) % 5 * (rank + 1)
        api["all_reduce"](t)
        check(torch.equal(t, torch.arange(3000, dtype=torch.float32) % 5 * (n * (n + 1) / 2)),
              "the operation after a %s disagreement is not exact" % field)
    return errors


def scenario_disagree():
    """`import cais` and the torch backend: ranks that disagree get the same one-line error
    and the next operation is exact (MODE=api or torch)."""
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    cais.configure({"switch_timeout_ms": 1000})
    if os.environ["MODE"] == "api":
        cais.init()
        ops = {"sum": cais.ReduceOp.SUM, "max": cais.ReduceOp.MAX}
        api = {"all_reduce": lambda t, op="sum": cais.all_reduce(t, op=ops[op]),
               "broadcast": lambda t, src: cais.broadcast(t, src=src),
               "layer": lambda layer: cais.all_reduce(torch_ones(1000), layer_id=layer)}
        errors = _disagreements(rank, n, api)
        stats = cais.stats()
    else:
        import torch.distributed as dist
        dist.init_process_group("cais")
        ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "band": dist.ReduceOp.BAND}
        api = {"all_reduce": lambda t, op="sum": dist.all_reduce(t, op=ops[op]),
               "broadcast": lambda t, src: dist.broadcast(t, src=src),
               "delegated": lambda t, op: dist.all_reduce(t, op=ops[op])}
        errors = _disagreements(rank, n, api)
        stats = dist.distributed_c10d._get_default_group().stats()
        dist.destroy_process_group()
    return {"errors": errors, "refused": stats["ops_refused"]}


def scenario_group_disagree():
    """`import cais`: members that disagree on new_group's group_id, or (4 ranks) on its
    ranks, get the same ValueError; a group created next with agreeing arguments works."""
    import datetime
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    cais.init(timeout=datetime.timedelta(seconds=3))
    errors = []
    cases = [lambda: cais.new_group(group_id=9 if rank == 1 else 3)]
    if n > 2:
        cases.append(lambda: cais.new_group(ranks=[0, 1] if rank == 1 else None, group_id=5))
    for fn in cases:
        try:
            fn()
            errors.append("no error")
        except ValueError as e:  # after a prefix naming this rank: the same text on all
            check("\n" not in str(e).strip(), "a multi-line error: %r" % str(e))
            errors.append(str(e)[str(e).find("group creation:"):])
    g = cais.new_group(group_id=4)
    t = torch_ones(1000) * (rank + 1)
    cais.all_reduce(t, group=g)
    check(bool((t == n * (n + 1) / 2).all()), "the group created after the errors is not exact")
    cais.shutdown()
    return {"errors": errors}


def scenario_torch_group_disagree():
    """The torch backend: ranks whose CAIS_GROUP_BASE differs (so do their switch group ids)
    get the same RuntimeError from new_group at once; a group created next works."""
    import torch
    import torch.distributed as dist
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo")
    os.environ["CAIS_GROUP_BASE"] = "64" if rank == 1 else "128"
    errors = []
    try:
        dist.new_group(backend="cais")
        errors.append("no error")
    except RuntimeError as e:
        check("\n" not in str(e).strip(), "a multi-line error: %r" % str(e))
        errors.append(str(e)[str(e).find("group creation:"):])
    os.environ["CAIS_GROUP_BASE"] = "128"
    g = dist.new_group(backend="cais")
    t = torch.ones(1000) * (rank + 1)
    dist.all_reduce(t, group=g)
    check(bool((t == n * (n + 1) / 2).all()), "the group created after the error is not exact")
    dist.destroy_process_group(g)
    dist.destroy_process_group()
    return {"errors": errors}


def torch_ones(k):
    import torch
    return torch.ones(k)


if __name__ == "__main__":
    fn = globals()["scenario_" + sys.argv[1]]
    print(json.dumps(fn()), flush=True)
