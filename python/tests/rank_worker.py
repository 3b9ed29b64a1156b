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
    eff = cais.configure({"timeout_ms": 5000, "offload_threshold": 0.3, "sram_usage_limit": 0.75})
    check(abs(eff["offload_threshold"] - 0.3) < 1e-9, "switch config not applied: %r" % eff)
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
    sw = cais.switch_stats()
    check(sw["completed_chunks"] > 0 and sw["conserved"], "switch stats %r" % sw)
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
    pg = dist.distributed_c10d._get_default_group()
    st = pg.stats()
    check(st["ops_switch"] > 0 and st["delegated"] >= 1, "stats %r" % st)
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


if __name__ == "__main__":
    fn = globals()["scenario_" + sys.argv[1]]
    print(json.dumps(fn()), flush=True)
