"""A Megatron-style transformer block trained with torch.distributed: tensor
parallelism, optionally with sequence parallelism, and data parallelism by DDP.

Tensor parallelism (Megatron-LM, Shoeybi et al. 2019): self-attention with its
heads split across the TP ranks (QKV column-parallel, output projection
row-parallel) and an MLP (column-parallel, then row-parallel). Without
sequence parallelism, Megatron's conjugate operators f (identity forward,
all-reduce backward) and g (all-reduce forward, identity backward) give 2
all-reduces forward and 2 backward per block. With sequence parallelism
(Korthikanti et al. 2022), layer norms and residuals run on a 1/TP slice of
the sequence, f becomes an all-gather along the sequence (reduce-scatter
backward) and g a reduce-scatter (all-gather backward): the same bytes, no
redundant layer-norm work, and the reduce-scatter is what the switch carries.
Data parallelism wraps the block in DistributedDataParallel over the
data-parallel groups; ranks are laid out as Megatron does (TP innermost).

The model code does not depend on the backend: "gloo", or "cais" (`import cais`
registers it). torch 1.13's Gloo has neither _reduce_scatter_base nor
_allgather_base, so on Gloo the two sequence-parallel collectives use the
list forms (all_reduce then slice, all_gather then cat) that Gloo has.
Each block's collectives carry a layer tag (the CAIS header's layer_id, via
cais.layer) on backend "cais": attention 1, MLP 2.

Run one training (ranks from torchrun's variables, or world size 1 without them):

    python3 tp_transformer.py --backend cais --steps 20 [--tp 2 --sequence-parallel]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from typing import List, Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F


class CommTimer:
    """Seconds spent inside the block's collectives (blocking: the wait is the cost)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    @contextlib.contextmanager
    def timed(self):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1


class Parallel:
    """Where this rank sits: its TP group (None when alone), rank and size, and
    whether the block is sequence-parallel."""

    def __init__(self, tp_rank: int = 0, tp_size: int = 1, group=None, sp: bool = False,
                 timer: Optional[CommTimer] = None) -> None:
        self.tp_rank, self.tp_size = tp_rank, tp_size
        self.group = group if tp_size > 1 else None
        self.sp = sp and tp_size > 1
        self.timer = timer or CommTimer()
        self.gloo = self.group is not None and dist.get_backend(self.group) == "gloo"

    def tag(self, layer: int):
        """The CAIS layer tag for the collectives inside (no-op without cais)."""
        cais = sys.modules.get("cais")
        if cais is None or self.group is None or self.gloo:
            return contextlib.nullcontext()
        return cais.layer(layer)

    def all_reduce(self, t: torch.Tensor, layer: int) -> None:
        with self.tag(layer), self.timer.timed():
            dist.all_reduce(t, group=self.group)

    def all_gather_seq(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        x = x.contiguous()
        with self.tag(layer), self.timer.timed():
            if self.gloo:
                parts = [torch.empty_like(x) for _ in range(self.tp_size)]
                dist.all_gather(parts, x, group=self.group)
                return torch.cat(parts, 0)
            out = torch.empty((self.tp_size * x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype)
            dist._all_gather_base(out, x, group=self.group)
            return out

    def reduce_scatter_seq(self, x: torch.Tensor, layer: int) -> torch.Tensor:
        x = x.contiguous()
        with self.tag(layer), self.timer.timed():
            if self.gloo:
                y = x.clone()
                dist.all_reduce(y, group=self.group)
                return y.chunk(self.tp_size, 0)[self.tp_rank].contiguous()
            out = torch.empty((x.shape[0] // self.tp_size,) + tuple(x.shape[1:]), dtype=x.dtype)
            dist._reduce_scatter_base(out, x, group=self.group)
            return out


class _EnterTP(torch.autograd.Function):
    """Before a column-parallel layer. TP: Megatron's f. SP: all-gather along
    the sequence forward, reduce-scatter backward."""

    @staticmethod
    def forward(ctx, x, par, layer):
        ctx.par, ctx.layer = par, layer
        if par.group is None or not par.sp:
            return x
        return par.all_gather_seq(x, layer)

    @staticmethod
    def backward(ctx, g):
        par = ctx.par
        if par.group is None:
            return g, None, None
        if par.sp:
            return par.reduce_scatter_seq(g, ctx.layer), None, None
        g = g.contiguous().clone()
        par.all_reduce(g, ctx.layer)
        return g, None, None


class _LeaveTP(torch.autograd.Function):
    """After a row-parallel layer. TP: Megatron's g. SP: reduce-scatter along
    the sequence forward, all-gather backward."""

    @staticmethod
    def forward(ctx, x, par, layer):
        ctx.par, ctx.layer = par, layer
        if par.group is None:
            return x
        if par.sp:
            return par.reduce_scatter_seq(x, layer)
        x = x.contiguous().clone()
        par.all_reduce(x, layer)
        return x

    @staticmethod
    def backward(ctx, g):
        par = ctx.par
        if par.group is not None and par.sp:
            return par.all_gather_seq(g, ctx.layer), None, None
        return g, None, None


ATTENTION_LAYER, MLP_LAYER = 1, 2


class Config:
    def __init__(self, hidden=64, heads=8, ffn=256, seq=16, batch=8, seed=1234):
        self.hidden, self.heads, self.ffn, self.seq, self.batch, self.seed = (
            hidden, heads, ffn, seq, batch, seed)


def full_weights(cfg: Config) -> dict:
    """The unsharded parameters, identical on every rank (same seed)."""
    g = torch.Generator().manual_seed(cfg.seed)
    h, f = cfg.hidden, cfg.ffn

    def w(o, i):
        return torch.randn(o, i, generator=g) / math.sqrt(i)
    return {
        "ln1_w": torch.ones(h), "ln1_b": torch.zeros(h),
        "qkv_w": w(3 * h, h), "qkv_b": torch.zeros(3 * h),
        "proj_w": w(h, h), "proj_b": torch.zeros(h),
        "ln2_w": torch.ones(h), "ln2_b": torch.zeros(h),
        "fc1_w": w(f, h), "fc1_b": torch.zeros(f),
        "fc2_w": w(h, f), "fc2_b": torch.zeros(h),
    }


# Parameters every TP rank holds whole (the rest are shards).
REPLICATED = ("ln1_w", "ln1_b", "proj_b", "ln2_w", "ln2_b", "fc2_b")


class TPBlock(torch.nn.Module):
    """Pre-LN transformer block on [sequence, batch, hidden] activations; this
    rank holds shard `par.tp_rank` of `par.tp_size` (and, with sequence
    parallelism, its slice of the sequence between the parallel regions)."""

    def __init__(self, cfg: Config, par: Parallel):
        super().__init__()
        tp_rank, tp_size = par.tp_rank, par.tp_size
        assert cfg.heads % tp_size == 0 and cfg.ffn % tp_size == 0
        assert not par.sp or cfg.seq % tp_size == 0
        self.cfg, self.par = cfg, par
        W = full_weights(cfg)
        h, hd = cfg.hidden, cfg.hidden // cfg.heads
        local_heads = cfg.heads // tp_size
        heads = range(tp_rank * local_heads, (tp_rank + 1) * local_heads)
        # QKV rows for this rank's heads (column-parallel), proj columns (row-parallel).
        rows = torch.cat([torch.arange(k * h + hh * hd, k * h + (hh + 1) * hd)
                          for k in range(3) for hh in heads])
        cols = torch.cat([torch.arange(hh * hd, (hh + 1) * hd) for hh in heads])
        fs = cfg.ffn // tp_size
        fcols = torch.arange(tp_rank * fs, (tp_rank + 1) * fs)
        P = torch.nn.Parameter
        self.ln1_w, self.ln1_b = P(W["ln1_w"]), P(W["ln1_b"])
        self.qkv_w, self.qkv_b = P(W["qkv_w"][rows].clone()), P(W["qkv_b"][rows].clone())
        self.proj_w, self.proj_b = P(W["proj_w"][:, cols].clone()), P(W["proj_b"])
        self.ln2_w, self.ln2_b = P(W["ln2_w"]), P(W["ln2_b"])
        self.fc1_w, self.fc1_b = P(W["fc1_w"][fcols].clone()), P(W["fc1_b"][fcols].clone())
        self.fc2_w, self.fc2_b = P(W["fc2_w"][:, fcols].clone()), P(W["fc2_b"])
        self.local_heads, self.hd = local_heads, hd

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        par = self.par
        H = x.shape[-1]
        y = F.layer_norm(x, (H,), self.ln1_w, self.ln1_b)
        y = _EnterTP.apply(y, par, ATTENTION_LAYER)
        S, B = y.shape[0], y.shape[1]
        qkv = F.linear(y, self.qkv_w, self.qkv_b)  # column-parallel
        q, k, v = qkv.view(S, B, 3, self.local_heads, self.hd).permute(2, 1, 3, 0, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.hd), dim=-1) @ v
        att = att.permute(2, 0, 1, 3).reshape(S, B, self.local_heads * self.hd)
        out = _LeaveTP.apply(F.linear(att, self.proj_w), par, ATTENTION_LAYER)  # row-parallel
        x = x + out + self.proj_b
        y = F.layer_norm(x, (H,), self.ln2_w, self.ln2_b)
        y = _EnterTP.apply(y, par, MLP_LAYER)
        y = F.gelu(F.linear(y, self.fc1_w, self.fc1_b))  # column-parallel
        y = _LeaveTP.apply(F.linear(y, self.fc2_w), par, MLP_LAYER)  # row-parallel
        return x + y + self.fc2_b

    def sync_replicated_grads(self) -> None:
        """Sequence parallelism: the replicated parameters saw only this rank's
        slice of the sequence; their gradients are summed over the TP group
        (Megatron's layer-norm gradient all-reduce), as one coalesced call."""
        par = self.par
        if par.group is None or not par.sp:
            return
        grads = [getattr(self, n).grad for n in REPLICATED]
        with par.timer.timed():
            dist.all_reduce_coalesced(grads, group=par.group)


def batch(cfg: Config, step: int, dp_rank: int = 0, dp_size: int = 1):
    """This data-parallel rank's part of step `step`'s batch, [seq, batch, hidden]:
    the whole batch has dp_size * cfg.batch samples, the same on every layout."""
    g = torch.Generator().manual_seed(cfg.seed * 1000 + step)
    x = torch.randn(dp_size * cfg.batch, cfg.seq, cfg.hidden, generator=g)
    target = torch.sin(x.flip(-1)) * 0.5  # a smooth function of the input to learn
    sl = slice(dp_rank * cfg.batch, (dp_rank + 1) * cfg.batch)
    return x[sl].transpose(0, 1).contiguous(), target[sl].transpose(0, 1).contiguous()


def train(cfg: Config, steps: int, tp_rank: int = 0, tp_size: int = 1, group=None,
          lr: float = 0.05, barrier=None, sp: bool = False, dp_rank: int = 0, dp_size: int = 1,
          dp_group=None) -> dict:
    """Returns per-step losses (of the whole batch, on every rank), step times and
    seconds in the block's collectives."""
    timer = CommTimer()
    par = Parallel(tp_rank, tp_size, group, sp, timer)
    block = TPBlock(cfg, par)
    model = block
    if dp_size > 1:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(block, process_group=dp_group, broadcast_buffers=False)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses: List[float] = []
    times: List[float] = []
    comm: List[float] = []
    for step in range(steps):
        t0 = time.perf_counter()
        c0 = timer.seconds
        x, target = batch(cfg, step, dp_rank, dp_size)
        if par.sp:
            s = cfg.seq // tp_size
            x, target = x[tp_rank * s:(tp_rank + 1) * s], target[tp_rank * s:(tp_rank + 1) * s]
        out = model(x)
        # This rank's share of the mean over its data-parallel batch: the shares
        # of a TP group add up to it under sequence parallelism.
        loss = F.mse_loss(out, target, reduction="sum") / (cfg.batch * cfg.seq * cfg.hidden)
        opt.zero_grad()
        loss.backward()
        block.sync_replicated_grads()
        opt.step()
        value = loss.detach().clone()
        if par.sp:
            dist.all_reduce(value, group=group)
        if dp_size > 1:
            dist.all_reduce(value, group=dp_group)
            value /= dp_size
        if barrier is not None:
            barrier()  # the write-up's 4.3: synchronise before stopping the clock
        times.append(time.perf_counter() - t0)
        comm.append(timer.seconds - c0)
        losses.append(value.item())
    return {"losses": losses, "times": times, "comm": comm, "collectives": timer.calls}


def make_groups(tp_size: int, backend: Optional[str] = None):
    """Megatron's layout: TP groups of consecutive ranks, DP groups across them.
    Every rank creates every group (torch requires it). Returns (tp_group,
    tp_rank, dp_group, dp_rank, dp_size)."""
    rank, n = dist.get_rank(), dist.get_world_size()
    if n % tp_size:
        raise ValueError("world size %d is not a multiple of --tp %d" % (n, tp_size))
    dp_size = n // tp_size
    tp_group = dp_group = None
    if tp_size > 1:
        for i in range(dp_size):
            g = dist.new_group(list(range(i * tp_size, (i + 1) * tp_size)), backend=backend)
            if rank // tp_size == i:
                tp_group = g
    if dp_size > 1:
        for j in range(tp_size):
            g = dist.new_group(list(range(j, n, tp_size)), backend=backend)
            if rank % tp_size == j:
                dp_group = g
    return tp_group, rank % tp_size, dp_group, rank // tp_size, dp_size


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="cais")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--tp", type=int, default=0,
                    help="tensor-parallel degree (default: the world size, no DP)")
    ap.add_argument("--sequence-parallel", action="store_true")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=256)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--batch", type=int, default=8, help="samples per data-parallel rank")
    a = ap.parse_args(argv)
    cfg = Config(a.hidden, a.heads, a.ffn, a.seq, a.batch)
    torch.set_num_threads(1)
    if "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        if a.backend == "cais":
            import cais  # noqa: F401  registers the backend
        dist.init_process_group(a.backend)
        tp_size = a.tp or dist.get_world_size()
        tp_group, tp_rank, dp_group, dp_rank, dp_size = make_groups(tp_size)
        res = train(cfg, a.steps, tp_rank, tp_size, tp_group, sp=a.sequence_parallel,
                    dp_rank=dp_rank, dp_size=dp_size, dp_group=dp_group)
        if a.backend == "cais":
            stats = [g.stats() for g in (tp_group, dp_group) if g is not None]
            res["stats"] = {k: sum(s[k] for s in stats) for k in ("ops", "ops_switch",
                                                                   "ops_host", "delegated")}
            res["stats"]["delegated_by_op"] = [s["delegated_by_op"] for s in stats]
        dist.destroy_process_group()
    else:
        res = train(cfg, a.steps)
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
