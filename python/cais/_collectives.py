"""The collectives (all_reduce, all_gather, reduce_scatter, broadcast),
synchronize, set_offload, stats and the layer tag. Private to the cais
package."""

from __future__ import annotations

import contextlib
import enum
import sys
import threading
from typing import Any, Dict, Optional

from . import _cais
from ._buffers import buffer_of, empty_like_shape, empty_like_stacked
from ._context import require_init, state
from ._groups import Group, c10d_groups, group_of, issue


class ReduceOp(enum.IntEnum):
    SUM = _cais.OP_SUM
    MAX = _cais.OP_MAX
    MIN = _cais.OP_MIN
    PRODUCT = _cais.OP_PRODUCT


_layer = threading.local()


def layer_id_of(layer_id: Optional[int]) -> int:
    v = layer_id if layer_id is not None else getattr(_layer, "value", 0)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 65535:
        raise ValueError("cais: layer_id %r must be an integer in 0..65535" % (v,))
    return v


@contextlib.contextmanager
def layer(layer_id: int):
    """Tags the operations this thread issues inside the block with a model
    layer (the header's layer_id, write-up 3.1): per-layer switch rules
    (`cais-cli add-rule --layer-id N`) and per-layer offload decisions act on
    it. Covers cais.* calls and torch.distributed calls on backend "cais"."""
    v = layer_id_of(layer_id)
    old = getattr(_layer, "value", 0)
    c10d = sys.modules.get(__package__ + "._cais_c10d")
    _layer.value = v
    if c10d is not None:
        c10d.set_layer(v)
    try:
        yield
    finally:
        _layer.value = old
        if c10d is not None:
            c10d.set_layer(old)


def op_code(op: Any) -> int:
    if isinstance(op, ReduceOp):
        return int(op)
    if isinstance(op, str):
        try:
            return int(ReduceOp[op.upper()])
        except KeyError:
            pass
    name = getattr(op, "name", None) or str(op).rsplit(".", 1)[-1]  # torch.distributed.ReduceOp
    if name.upper() in ReduceOp.__members__:
        return int(ReduceOp[name.upper()])
    raise ValueError("cais: reduction %r is not supported; use cais.ReduceOp.SUM, MAX, MIN or "
                     "PRODUCT" % (op,))


def all_reduce(tensor: Any, op: Any = ReduceOp.SUM, group: Optional[Group] = None,
               async_op: bool = False, *, group_id: Optional[int] = None,
               layer_id: Optional[int] = None) -> Any:
    """In place: tensor = op over the group's ranks. Returns the tensor (or a Work).
    group_id= names the group by its switch id, as in the write-up (3.4)."""
    g = group_of(group, group_id)
    code = op_code(op)
    b = buffer_of(tensor, "all_reduce", writable=True)
    layer = layer_id_of(layer_id)
    return issue(g, lambda c: c.all_reduce_async(b.ptr, b.count, b.dtype, code, layer), [b],
                 tensor, async_op)


def all_gather(tensor: Any, group: Optional[Group] = None, out: Any = None,
               async_op: bool = False, *, group_id: Optional[int] = None,
               layer_id: Optional[int] = None) -> Any:
    """Returns out[r] = rank r's tensor, shape (group size,) + tensor.shape. `out`,
    if given, must be contiguous with that shape and dtype."""
    g = group_of(group, group_id)
    b = buffer_of(tensor, "all_gather", writable=False)
    if out is None:
        out = empty_like_stacked(tensor, g.size)
    o = buffer_of(out, "all_gather", writable=True)
    if o.dtype != b.dtype or o.count != b.count * g.size:
        raise ValueError("cais.all_gather: out must hold %d elements of the input's dtype, it "
                         "holds %d" % (b.count * g.size, o.count))
    layer = layer_id_of(layer_id)
    return issue(g, lambda c: c.all_gather_async(b.ptr, o.ptr, b.count, b.dtype, layer), [b, o],
                 out, async_op)


def reduce_scatter(tensor: Any, op: Any = ReduceOp.SUM, group: Optional[Group] = None,
                   out: Any = None, async_op: bool = False, *, group_id: Optional[int] = None,
                   layer_id: Optional[int] = None) -> Any:
    """Returns this rank's block of op over the group's ranks of `tensor`, split
    along its first dimension into group-size blocks (as torch's
    reduce_scatter_tensor): shape (tensor.shape[0] // size,) + tensor.shape[1:].
    Through the switch each rank receives only its own block. `out`, if given,
    must be contiguous with that shape and dtype."""
    g = group_of(group, group_id)
    code = op_code(op)
    shape = tuple(getattr(tensor, "shape", ()))
    if not shape or shape[0] % g.size:
        raise ValueError("cais.reduce_scatter: the first dimension of a tensor of shape %r must "
                         "be a multiple of the group size %d" % (shape, g.size))
    b = buffer_of(tensor, "reduce_scatter", writable=False)
    if out is None:
        out = empty_like_shape(tensor, (shape[0] // g.size,) + shape[1:])
    o = buffer_of(out, "reduce_scatter", writable=True)
    if o.dtype != b.dtype or o.count * g.size != b.count:
        raise ValueError("cais.reduce_scatter: out must hold %d elements of the input's dtype, "
                         "it holds %d" % (b.count // g.size, o.count))
    layer = layer_id_of(layer_id)
    return issue(g, lambda c: c.reduce_scatter_async(b.ptr, o.ptr, o.count, b.dtype, code, layer),
                 [b, o], out, async_op)


def broadcast(tensor: Any, src: int = 0, group: Optional[Group] = None,
              async_op: bool = False, *, group_id: Optional[int] = None,
              layer_id: Optional[int] = None) -> Any:
    """In place: tensor on every rank = tensor on group rank `src`."""
    g = group_of(group, group_id)
    if not 0 <= src < g.size:
        raise ValueError("cais.broadcast: src %d must be a rank of the group (0..%d)"
                         % (src, g.size - 1))
    b = buffer_of(tensor, "broadcast", writable=True)
    layer = layer_id_of(layer_id)
    return issue(g, lambda c: c.broadcast_async(b.ptr, b.count, b.dtype, src, layer), [b],
                 tensor, async_op)


def synchronize(group: Optional[Group] = None) -> None:
    """Waits for every operation issued so far (on `group`, or on every group)."""
    require_init()
    groups = [group] if group is not None else list(state.groups.values())
    for g in groups:
        g.synchronize()
    if group is None:
        for pg in c10d_groups():
            pg.synchronize()


def set_offload(enabled: bool, group: Optional[Group] = None) -> None:
    """Use (True) or avoid (False) the switch, for `group` or for every group of this
    process, including torch.distributed "cais" process groups. The group agrees within
    about switch_timeout_ms (1 s) and runs on its Gloo host path meanwhile and after.
    For a whole switch (every job), use configure({"offload_threshold": 1}) or
    `cais-cli configure offload_threshold=1` instead (needs the embedded controller)."""
    if group is not None:
        group.set_offload(enabled)
        return
    state.offload = bool(enabled)
    for g in state.groups.values():
        g.set_offload(enabled)
    for pg in c10d_groups():
        pg.set_offload(bool(enabled))


def stats(group: Optional[Group] = None) -> Dict[str, Any]:
    """The client's counters for `group` (default: the world group)."""
    return group_of(group).stats()
