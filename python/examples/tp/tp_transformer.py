"""A Megatron-style tensor-parallel transformer block trained with torch.distributed.

Self-attention (heads split across ranks: QKV column-parallel, output projection
row-parallel) and an MLP (column-parallel then row-parallel), each with Megatron's
two conjugate operators: f (identity forward, all-reduce backward) before the
column-parallel layer and g (all-reduce forward, identity backward) after the
row-parallel one: 2 all-reduces forward and 2 backward per block.

The backend is whatever the process group is: "gloo", or "cais" (`import cais`
registers it) -- the model code does not change.

Run one training (ranks from torchrun's variables, or world size 1 without them):

    python3 tp_transformer.py --backend cais --steps 20        # under torchrun / launch
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from typing import List, Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F


class CommTimer:
    """Seconds spent inside all-reduces (they are blocking: the wait is the cost)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def all_reduce(self, t: torch.Tensor, group) -> None:
        t0 = time.perf_counter()
        dist.all_reduce(t, group=group)
        self.seconds += time.perf_counter() - t0
        self.calls += 1


class _CopyToTP(torch.autograd.Function):  # Megatron's f
    @staticmethod
    def forward(ctx, x, group, timer):
        ctx.group, ctx.timer = group, timer
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous().clone()
        if ctx.group is not None:
            ctx.timer.all_reduce(g, ctx.group)
        return g, None, None


class _ReduceFromTP(torch.autograd.Function):  # Megatron's g
    @staticmethod
    def forward(ctx, x, group, timer):
        x = x.contiguous().clone()
        if group is not None:
            timer.all_reduce(x, group)
        return x

    @staticmethod
    def backward(ctx, g):
        return g, None, None


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


class TPBlock(torch.nn.Module):
    """Pre-LN transformer block; rank `tp_rank` of `tp_size` holds its shard."""

    def __init__(self, cfg: Config, tp_rank: int, tp_size: int, group, timer: CommTimer):
        super().__init__()
        assert cfg.heads % tp_size == 0 and cfg.ffn % tp_size == 0
        self.cfg, self.group, self.timer = cfg, group if tp_size > 1 else None, timer
        self.tp_size = tp_size
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
        B, S, H = x.shape
        y = F.layer_norm(x, (H,), self.ln1_w, self.ln1_b)
        y = _CopyToTP.apply(y, self.group, self.timer)
        qkv = F.linear(y, self.qkv_w, self.qkv_b)  # column-parallel
        q, k, v = qkv.view(B, S, 3, self.local_heads, self.hd).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.hd), dim=-1) @ v
        att = att.transpose(1, 2).reshape(B, S, self.local_heads * self.hd)
        out = _ReduceFromTP.apply(F.linear(att, self.proj_w), self.group, self.timer)  # row-par.
        x = x + out + self.proj_b
        y = F.layer_norm(x, (H,), self.ln2_w, self.ln2_b)
        y = _CopyToTP.apply(y, self.group, self.timer)
        y = F.gelu(F.linear(y, self.fc1_w, self.fc1_b))  # column-parallel
        y = _ReduceFromTP.apply(F.linear(y, self.fc2_w), self.group, self.timer)  # row-parallel
        return x + y + self.fc2_b


def batch(cfg: Config, step: int):
    g = torch.Generator().manual_seed(cfg.seed * 1000 + step)
    x = torch.randn(cfg.batch, cfg.seq, cfg.hidden, generator=g)
    target = torch.sin(x.flip(-1)) * 0.5  # a smooth function of the input to learn
    return x, target


def train(cfg: Config, steps: int, tp_rank: int = 0, tp_size: int = 1, group=None,
          lr: float = 0.05, barrier=None) -> dict:
    """Returns per-step losses, step times and communication seconds."""
    timer = CommTimer()
    model = TPBlock(cfg, tp_rank, tp_size, group, timer)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses: List[float] = []
    times: List[float] = []
    comm: List[float] = []
    for step in range(steps):
        t0 = time.perf_counter()
        c0 = timer.seconds
        x, target = batch(cfg, step)
        loss = F.mse_loss(model(x), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if barrier is not None:
            barrier()  # the write-up's 4.3: synchronise before stopping the clock
        times.append(time.perf_counter() - t0)
        comm.append(timer.seconds - c0)
        losses.append(loss.item())
    return {"losses": losses, "times": times, "comm": comm, "allreduces": timer.calls}


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default="cais")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=256)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--batch", type=int, default=8)
    a = ap.parse_args(argv)
    cfg = Config(a.hidden, a.heads, a.ffn, a.seq, a.batch)
    torch.set_num_threads(1)
    if "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        if a.backend == "cais":
            import cais  # noqa: F401  registers the backend
        dist.init_process_group(a.backend)
        res = train(cfg, a.steps, dist.get_rank(), dist.get_world_size(), dist.group.WORLD)
        if a.backend == "cais":
            res["stats"] = dist.distributed_c10d._get_default_group().stats()
        dist.destroy_process_group()
    else:
        res = train(cfg, a.steps)
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
