"""cais: CAIS in-switch collectives for Python (numpy arrays and torch tensors).

The CAIS write-up's API (3.4, 4.2) over inca's C++ client
(include/inca/client/communicator.h); see docs/python.md::

    import cais
    cais.init(controller_addr="127.0.0.1:50051")          # rank/world size from RANK/WORLD_SIZE
    tp_group = cais.new_group(ranks=[0, 1, 2, 3], group_id=0)
    reduced = cais.all_reduce(partial_result, group=tp_group)   # in place, returns it
    cais.synchronize()

Importing cais also registers the torch.distributed backend "cais" when torch
is installed: ``dist.init_process_group("cais")``.

Buffers are used in place, without copies, when they are contiguous CPU
memory of a supported dtype (float32, float16, bfloat16, int32). A
non-contiguous tensor or array is reduced through a contiguous copy that is
written back, with a CaisWarning (the write-up's 3.4 note: the copy costs
time; call .contiguous() yourself to silence it).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import datetime
import enum
import os
import sys
import threading
import warnings
from typing import Any, Dict, Iterable, List, Optional

try:
    from . import _cais
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "cais: the compiled module _cais is missing or does not load (%s). Build it with "
        "`ninja -C build/release cais_python` (or scripts/setup.sh) and put build/release/python "
        "on PYTHONPATH; it needs Debian's /usr/bin/python3." % e
    ) from e

__all__ = [
    "init", "new_group", "all_reduce", "all_gather", "reduce_scatter", "broadcast", "synchronize",
    "configure", "layer",
    "set_offload", "stats", "switch_stats", "shutdown", "is_initialized", "get_rank",
    "get_world_size", "ReduceOp", "Group", "Work", "Error", "CaisWarning",
]

from ._buffers import Buffer as _Buffer  # noqa: E402,F401
from ._buffers import CaisWarning  # noqa: E402,F401
from ._buffers import buffer_of as _buffer  # noqa: E402
from ._buffers import empty_like_shape as _empty_like_shape  # noqa: E402
from ._buffers import empty_like_stacked as _empty_like_stacked  # noqa: E402

Error = _cais.Error
"""Raised for failures that are neither bad arguments (ValueError), timeouts
(TimeoutError) nor an unreachable switch or controller (ConnectionError)."""


class ReduceOp(enum.IntEnum):
    SUM = _cais.OP_SUM
    MAX = _cais.OP_MAX
    MIN = _cais.OP_MIN
    PRODUCT = _cais.OP_PRODUCT


WORLD_GROUP_ID = 255
"""Switch group id of the implicit world group (collectives without group=)."""
DEFAULT_CONTROLLER_PORT = 50051
DEFAULT_SWITCH_PORT = 9410

# configure()'s keys and their declarations (src/client/settings.cc,
# src/switchd/settings.cc), read from the files the build writes.
from ._settings import CLIENT_KEYS as _CLIENT_KEYS  # noqa: E402
from ._settings import CLIENT_OPTION as _CLIENT_OPTION  # noqa: E402
from ._settings import SWITCH_KEYS as _SWITCH_KEYS  # noqa: E402
from ._settings import SWITCH_SETTINGS as _SWITCH_SETTINGS  # noqa: E402
from ._settings import client_value as _client_value  # noqa: E402
from ._settings import env_setting as _env_setting  # noqa: E402

_ALL_KEYS = _CLIENT_KEYS | _SWITCH_KEYS | {"controller_port"}
# The largest chunk one UDP datagram carries (65,507 bytes less the 20-byte
# CAIS header, rounded down to whole 4-byte elements).
MAX_CHUNK_BYTES = 65472
# inca-switchd's default max_payload_bytes: a 9000-byte jumbo frame less the
# IPv4, UDP and CAIS headers.
DEFAULT_SWITCH_PAYLOAD = 8952


class _State:
    def __init__(self) -> None:
        self.initialized = False
        self.rank = 0
        self.world_size = 1
        self.switch_address = ""
        self.master_addr = "127.0.0.1"
        self.master_port = 29500
        self.bind_ip = "127.0.0.1"
        self.offload = True
        self.controller: Optional[Any] = None
        self.controller_host: Optional[str] = None
        self.token = ""
        self.require_switch = False
        self.host_timeout_ms: Optional[int] = None
        self.client: Dict[str, int] = {}
        self.controller_port = DEFAULT_CONTROLLER_PORT
        self.groups: Dict[int, "Group"] = {}
        # On rank 0: the rendezvous store every group of this job meets in.
        self.store_server: Optional[Any] = None


_state = _State()


def _env_int(name: str) -> Optional[int]:
    v = os.environ.get(name)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError("environment variable %s=%r is not an integer" % (name, v)) from None


def _split_host_port(addr: str, default_port: int) -> tuple:
    if addr.count(":") == 1:
        host, port = addr.split(":")
        return host, int(port)
    return addr, default_port


def init(controller_addr: Optional[str] = None, *, rank: Optional[int] = None,
         world_size: Optional[int] = None, switch_addr: Optional[str] = None,
         master_addr: Optional[str] = None, master_port: Optional[int] = None,
         bind_ip: Optional[str] = None, offload: Optional[bool] = None,
         token: Optional[str] = None, require_switch: Optional[bool] = None,
         timeout: Optional[datetime.timedelta] = None) -> None:
    """Initialises this process's CAIS context. Every rank calls it.

    controller_addr: the switch's control API ("host[:port]", port defaults to
        configure()'s controller_port, 50051); None skips the control plane
        (configure() then cannot set switch-side keys).
    rank, world_size: default to RANK and WORLD_SIZE (as torchrun sets them).
    switch_addr: the switch's data address; default INCA_SWITCH, else the
        controller's host on port 9410, else 127.0.0.1:9410. "none": host path only.
    master_addr, master_port: default MASTER_ADDR/MASTER_PORT (127.0.0.1:29500);
        rank 0 serves the rendezvous store that every group meets in (the world
        group and new_group's) on master_addr:master_port + 1.
    offload: False starts on the host path (also INCA_OFFLOAD=0).
    token: the control API's bearer token (also INCA_TOKEN).
    require_switch: True fails instead of falling back to the host path (also
        INCA_REQUIRE_SWITCH=1): group creation raises when the group cannot form
        on the switch, and an operation that would run on Gloo because the
        group is not on the switch raises.
    timeout: how long a rank waits for its peers on the host path (Gloo's
        connection and operation timeout), as torch's init_process_group(
        timeout=); default 60 s.
    """
    if _state.initialized:
        raise RuntimeError("cais.init() was already called in this process; call cais.shutdown() "
                           "first to re-initialise")
    r = rank if rank is not None else _env_int("RANK")
    w = world_size if world_size is not None else _env_int("WORLD_SIZE")
    if r is None or w is None:
        raise ValueError("cais.init: rank and world size unknown: pass rank= and world_size=, or "
                         "run under torchrun (which sets RANK and WORLD_SIZE)")
    if not 0 <= r < w:
        raise ValueError("cais.init: rank %d must be in [0, world_size=%d)" % (r, w))
    tok = token if token is not None else os.environ.get("INCA_TOKEN", "")
    _cais.validate_token(tok, "token=" if token is not None else "INCA_TOKEN")
    _state.rank, _state.world_size = int(r), int(w)
    _state.master_addr = master_addr or os.environ.get("MASTER_ADDR") or "127.0.0.1"
    mp = master_port if master_port is not None else _env_int("MASTER_PORT")
    _state.master_port = int(mp) if mp is not None else 29500
    _state.bind_ip = bind_ip or os.environ.get("INCA_BIND_IP") or "127.0.0.1"
    if offload is None:  # INCA_OFFLOAD, as the setting declares it
        offload = _env_setting("offload") is not False
    _state.offload = bool(offload)
    _state.token = tok
    if require_switch is None:  # INCA_REQUIRE_SWITCH
        require_switch = _env_setting("require_switch")
    _state.require_switch = bool(require_switch)
    _state.host_timeout_ms = None
    if timeout is not None:
        ms = int(timeout.total_seconds() * 1000)
        if ms <= 1000:
            raise ValueError("cais.init: timeout must be longer than 1 s (the switch path's own "
                             "timeout), got %r" % (timeout,))
        _state.host_timeout_ms = ms
    _state.controller = None
    _state.controller_host = None
    if controller_addr:
        _connect_controller(controller_addr)
    if switch_addr is None:
        switch_addr = os.environ.get("INCA_SWITCH")
    if switch_addr is None:
        host = _state.controller_host or "127.0.0.1"
        switch_addr = "%s:%d" % (host, DEFAULT_SWITCH_PORT)
    _state.switch_address = "" if switch_addr == "none" else switch_addr
    _state.store_server = None
    if _state.rank == 0:
        address = _world_store()
        try:
            _state.store_server = _cais.serve_store(address)
        except RuntimeError as e:
            raise RuntimeError("cais.init: rank 0 cannot serve the rendezvous store on %s "
                               "(master_addr:master_port + 1): %s" % (address, e)) from None
    _state.initialized = True


def _world_store() -> str:
    return "%s:%d" % (_state.master_addr, _state.master_port + 1)


def _connect_controller(addr: str) -> None:
    host, port = _split_host_port(addr, _state.controller_port)
    target = "%s:%d" % (host, port)
    c = _cais.Control(target, _state.token)
    c.health()  # ConnectionError saying what to check when the switch is not there
    _state.controller, _state.controller_host = c, host


def is_initialized() -> bool:
    return _state.initialized


def _require_init() -> None:
    if not _state.initialized:
        raise RuntimeError("cais.init() has not been called in this process: call "
                           "cais.init(controller_addr=...) first (rank and world size come from "
                           "its arguments or from RANK/WORLD_SIZE)")


def get_rank() -> int:
    _require_init()
    return _state.rank


def get_world_size() -> int:
    _require_init()
    return _state.world_size


class Group:
    """A group of ranks with its own switch group id (new_group's result)."""

    def __init__(self, ranks: List[int], group_id: int, store_address: Optional[str]) -> None:
        self.ranks = list(ranks)
        self.group_id = group_id
        self.rank = self.ranks.index(_state.rank)
        self.size = len(self.ranks)
        options = dict(
            rank=self.rank, world_size=self.size, group_id=group_id,
            switch_address=_state.switch_address,
            # The job's store (rank 0's, from init), or one of the group's own
            # that its first rank serves.
            store_address=store_address or _world_store(),
            serve_store=store_address is not None and self.rank == 0,
            offload=_state.offload, bind_ip=_state.bind_ip,
            require_switch=_state.require_switch)
        if _state.host_timeout_ms is not None:
            options["host_timeout_ms"] = _state.host_timeout_ms
        options.update(_state.client)
        self._comm = _cais.create(options)
        # Operations in flight with the buffers they use, oldest first. A Work
        # the caller drops keeps its entry here, so the memory the operation
        # writes stays alive until it has completed (operations complete in
        # issue order); entries are reaped by later calls, synchronize and close.
        self._pending: Any = collections.deque()
        self._lock = threading.Lock()

    def _issue(self, work: Any, buffers: List["_Buffer"], result: Any) -> "Work":
        w = Work(work, buffers, result)
        with self._lock:
            while self._pending and self._pending[0].is_completed():
                self._pending.popleft()._finish()
            self._pending.append(w)
        return w

    def _drain(self) -> None:
        with self._lock:
            pending, self._pending = list(self._pending), collections.deque()
        for w in pending:
            try:
                w.wait()
            except Exception:  # raised to whoever waits on it; here only released
                pass

    def synchronize(self) -> None:
        self._comm.synchronize()
        self._drain()

    def set_offload(self, enabled: bool) -> None:
        self._comm.set_offload(bool(enabled))

    def stats(self) -> Dict[str, Any]:
        return self._comm.stats()

    def close(self) -> None:
        self._drain()
        self._comm.close()

    def __repr__(self) -> str:
        return "cais.Group(ranks=%r, group_id=%d)" % (self.ranks, self.group_id)


def new_group(ranks: Optional[Iterable[int]] = None, group_id: int = 0,
              store_addr: Optional[str] = None) -> Optional[Group]:
    """Creates a group of the given global ranks (default: all) with a switch group id
    (0..254; 255 is the implicit world group). Every member calls it with the same
    arguments; on a rank outside `ranks` it returns None without communicating. The
    group meets in the job's rendezvous store (rank 0's, on master_port + 1) unless
    `store_addr` names another, which the group's first rank then serves. Members that
    disagree on group_id or on the ranks all get the same ValueError (group_id: once
    the rendezvous times out, init's `timeout`)."""
    _require_init()
    rs = list(range(_state.world_size)) if ranks is None else [int(r) for r in ranks]
    if not rs or len(set(rs)) != len(rs) or any(not 0 <= r < _state.world_size for r in rs):
        raise ValueError("cais.new_group: ranks %r must be distinct ranks in [0, %d)"
                         % (rs, _state.world_size))
    if not 0 <= group_id <= 254:
        raise ValueError("cais.new_group: group_id %d must be 0..254 (255 is the world group)"
                         % group_id)
    if group_id in _state.groups:
        raise ValueError("cais.new_group: group_id %d is already in use in this process (%r); "
                         "pick another id" % (group_id, _state.groups[group_id]))
    if _state.rank not in rs:
        return None
    g = Group(rs, group_id, store_addr)
    _state.groups[group_id] = g
    return g


def _world() -> Group:
    _require_init()
    g = _state.groups.get(WORLD_GROUP_ID)
    if g is None:
        g = Group(list(range(_state.world_size)), WORLD_GROUP_ID, None)
        _state.groups[WORLD_GROUP_ID] = g
    return g


def _group(group: Optional[Group], group_id: Optional[int] = None) -> Group:
    if group_id is not None:
        # The write-up's form (3.4): cais.all_reduce(t, group_id=0).
        if group is not None and group.group_id != group_id:
            raise ValueError("cais: group=%r and group_id=%d disagree; pass one of them"
                             % (group, group_id))
        _require_init()
        g = _state.groups.get(group_id)
        if g is None:
            # Every rank makes the same call, so creating the group of all
            # ranks here is as collective as new_group(group_id=...) itself.
            g = _world() if group_id == WORLD_GROUP_ID else new_group(group_id=group_id)
        return g
    if group is None:
        return _world()
    if not isinstance(group, Group):
        raise TypeError("group must be a cais.Group from cais.new_group(), got %r" % (group,))
    return group


class Work:
    """An asynchronous operation: wait() blocks until it is done, writes back
    any non-contiguous original, and returns the result tensor/array.
    Dropping a Work without wait() is safe: its group keeps the buffers until
    the operation has completed, and writes back then."""

    def __init__(self, work: Any, buffers: List[_Buffer], result: Any) -> None:
        self._work, self._buffers, self._result = work, buffers, result
        self._done = False

    def _finish(self) -> None:
        if not self._done:
            self._done = True
            buffers, self._buffers = self._buffers, []
            for b in buffers:
                b.write_back()

    def wait(self) -> Any:
        if not self._done:
            try:
                self._work.wait()
            except BaseException:
                self._done, self._buffers = True, []
                raise
            self._finish()
        return self._result

    def is_completed(self) -> bool:
        return self._done or self._work.done()


_layer = threading.local()


def _layer_id(layer_id: Optional[int]) -> int:
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
    v = _layer_id(layer_id)
    old = getattr(_layer, "value", 0)
    c10d = sys.modules.get(__name__ + "._cais_c10d")
    _layer.value = v
    if c10d is not None:
        c10d.set_layer(v)
    try:
        yield
    finally:
        _layer.value = old
        if c10d is not None:
            c10d.set_layer(old)


def _run(g: Group, work: Any, buffers: List[_Buffer], result: Any, async_op: bool) -> Any:
    w = g._issue(work, buffers, result)
    return w if async_op else w.wait()


def _op_code(op: Any) -> int:
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
    g = _group(group, group_id)
    code = _op_code(op)
    b = _buffer(tensor, "all_reduce", writable=True)
    w = g._comm.all_reduce_async(b.ptr, b.count, b.dtype, code, _layer_id(layer_id))
    return _run(g, w, [b], tensor, async_op)


def all_gather(tensor: Any, group: Optional[Group] = None, out: Any = None,
               async_op: bool = False, *, group_id: Optional[int] = None,
               layer_id: Optional[int] = None) -> Any:
    """Returns out[r] = rank r's tensor, shape (group size,) + tensor.shape. `out`,
    if given, must be contiguous with that shape and dtype."""
    g = _group(group, group_id)
    b = _buffer(tensor, "all_gather", writable=False)
    if out is None:
        out = _empty_like_stacked(tensor, g.size)
    o = _buffer(out, "all_gather", writable=True)
    if o.dtype != b.dtype or o.count != b.count * g.size:
        raise ValueError("cais.all_gather: out must hold %d elements of the input's dtype, it "
                         "holds %d" % (b.count * g.size, o.count))
    w = g._comm.all_gather_async(b.ptr, o.ptr, b.count, b.dtype, _layer_id(layer_id))
    return _run(g, w, [b, o], out, async_op)


def reduce_scatter(tensor: Any, op: Any = ReduceOp.SUM, group: Optional[Group] = None,
                   out: Any = None, async_op: bool = False, *, group_id: Optional[int] = None,
                   layer_id: Optional[int] = None) -> Any:
    """Returns this rank's block of op over the group's ranks of `tensor`, split
    along its first dimension into group-size blocks (as torch's
    reduce_scatter_tensor): shape (tensor.shape[0] // size,) + tensor.shape[1:].
    Through the switch each rank receives only its own block. `out`, if given,
    must be contiguous with that shape and dtype."""
    g = _group(group, group_id)
    code = _op_code(op)
    shape = tuple(getattr(tensor, "shape", ()))
    if not shape or shape[0] % g.size:
        raise ValueError("cais.reduce_scatter: the first dimension of a tensor of shape %r must "
                         "be a multiple of the group size %d" % (shape, g.size))
    b = _buffer(tensor, "reduce_scatter", writable=False)
    if out is None:
        out = _empty_like_shape(tensor, (shape[0] // g.size,) + shape[1:])
    o = _buffer(out, "reduce_scatter", writable=True)
    if o.dtype != b.dtype or o.count * g.size != b.count:
        raise ValueError("cais.reduce_scatter: out must hold %d elements of the input's dtype, "
                         "it holds %d" % (b.count // g.size, o.count))
    w = g._comm.reduce_scatter_async(b.ptr, o.ptr, o.count, b.dtype, code, _layer_id(layer_id))
    return _run(g, w, [b, o], out, async_op)


def broadcast(tensor: Any, src: int = 0, group: Optional[Group] = None,
              async_op: bool = False, *, group_id: Optional[int] = None,
              layer_id: Optional[int] = None) -> Any:
    """In place: tensor on every rank = tensor on group rank `src`."""
    g = _group(group, group_id)
    if not 0 <= src < g.size:
        raise ValueError("cais.broadcast: src %d must be a rank of the group (0..%d)"
                         % (src, g.size - 1))
    b = _buffer(tensor, "broadcast", writable=True)
    w = g._comm.broadcast_async(b.ptr, b.count, b.dtype, src, _layer_id(layer_id))
    return _run(g, w, [b], tensor, async_op)


def synchronize(group: Optional[Group] = None) -> None:
    """Waits for every operation issued so far (on `group`, or on every group)."""
    _require_init()
    groups = [group] if group is not None else list(_state.groups.values())
    for g in groups:
        g.synchronize()
    if group is None:
        for pg in _c10d_groups():
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
    _state.offload = bool(enabled)
    for g in _state.groups.values():
        g.set_offload(enabled)
    for pg in _c10d_groups():
        pg.set_offload(bool(enabled))


def stats(group: Optional[Group] = None) -> Dict[str, Any]:
    """The client's counters for `group` (default: the world group)."""
    return _group(group).stats()


def switch_stats() -> Dict[str, Any]:
    """The switch's counters through the controller (needs init(controller_addr=...))."""
    _require_init()
    if _state.controller is None:
        raise RuntimeError("cais.switch_stats needs the control plane: pass controller_addr to "
                           "cais.init")
    return _state.controller.stats()


def configure(config: Dict[str, Any]) -> Dict[str, Any]:
    """Applies the write-up's settings (4.2, 5.3) as written; returns the settings
    in effect. Each key means what the write-up says (docs/python.md):

    chunk_size: bytes of tensor per chunk, the unit the switch reduces in one
        slot. A chunk travels in one datagram, so it is capped at what the
        switch accepts (its max_payload_bytes, 8952 by default: a 9000-byte
        jumbo frame) and at 65472; the write-up's 65536 becomes the cap, with
        a CaisWarning, and the returned dict says what is used. Client side,
        for groups created from now on.
    offload_threshold, sram_usage_limit, timeout_ms, max_pending_chunks, group_share,
        result_hold_ms, lease_ms: the switch's run-time settings, set at once through the
        controller (init(controller_addr=...)); offload_threshold 1: all on the host path.
    switch_timeout_ms, join_timeout_ms, client_window (chunks in flight per
        rank): inca's client settings, for groups created from now on.
    controller_port: the control API's port (default 50051), reconnects if needed.
    May be called before init() for client keys and controller_port.
    """
    if not isinstance(config, dict):
        raise TypeError("cais.configure takes a dict, e.g. {'chunk_size': 65536}")
    unknown = sorted(set(config) - _ALL_KEYS)
    if unknown:
        raise ValueError("cais.configure: unknown key(s) %s; known: %s"
                         % (", ".join(unknown), ", ".join(sorted(_ALL_KEYS))))
    client = {_CLIENT_OPTION[k]: _client_value(k, config[k]) for k in _CLIENT_KEYS & set(config)}
    switch = {k: config[k] for k in _SWITCH_KEYS & set(config)}
    for k, v in switch.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError("cais.configure: %s must be a number, got %r" % (k, v))
    if switch and (not _state.initialized or _state.controller is None):
        raise ValueError("cais.configure: %s are switch settings and need the control plane: "
                         "call cais.init(controller_addr='HOST:PORT') first (or use "
                         "`cais-cli configure`)" % ", ".join(sorted(switch)))
    if "controller_port" in config:
        p = config["controller_port"]
        if isinstance(p, bool) or not isinstance(p, int) or not 0 < p < 65536:
            raise ValueError("cais.configure: controller_port must be 1..65535, got %r" % (p,))
        _state.controller_port = p
        if _state.controller is not None and _state.controller_host is not None:
            _connect_controller("%s:%d" % (_state.controller_host, p))
    if "chunk_size" in client:
        client["chunk_size"] = _chunk_size(client["chunk_size"])
    existing = list(_state.groups.values())
    if client and existing:
        warnings.warn("cais.configure: %s apply to groups created from now on; existing groups "
                      "%r keep their settings" % (", ".join(sorted(client)), existing),
                      CaisWarning, stacklevel=2)
    if switch:
        _state.controller.set_config({k: repr(float(v)) if isinstance(v, float) else str(v)
                                      for k, v in switch.items()})
    _state.client.update(client)
    effective: Dict[str, Any] = {k: _state.client[o] for k, o in _CLIENT_OPTION.items()
                                 if o in _state.client}
    effective["controller_port"] = _state.controller_port
    if _state.controller is not None:
        cfg = _state.controller.get_config()
        for k in _SWITCH_KEYS:
            if k in cfg:
                effective[k] = (int if _SWITCH_SETTINGS[k]["type"] == "integer" else float)(cfg[k])
    return effective


def _chunk_size(requested: int) -> int:
    """The chunk size to use for `requested`: a multiple of 4, at most what
    the switch accepts in one datagram (asked through the controller when
    there is one, else its default) and at most MAX_CHUNK_BYTES."""
    if requested < 4 or requested % 4:
        raise ValueError("cais.configure: chunk_size %d must be a multiple of 4, at least 4 "
                         "(8952 fills a 9000-byte jumbo frame, 1452 a 1500-byte MTU)" % requested)
    cap, source = DEFAULT_SWITCH_PAYLOAD, "the switch's default max_payload_bytes"
    if _state.controller is not None:
        try:
            cap = int(_state.controller.get_config().get("chunk_size", cap))
            source = "the switch's max_payload_bytes"
        except Exception:  # the switch answers later calls; the default is safe
            pass
    cap = min(cap, MAX_CHUNK_BYTES)
    if requested <= cap:
        return requested
    warnings.warn("cais.configure: chunk_size %d is more than one datagram carries here: a chunk "
                  "is one switch slot in one datagram, and %s is %d bytes; using %d "
                  "(docs/protocol.md, 'What a chunk is')" % (requested, source, cap, cap),
                  CaisWarning, stacklevel=3)
    return cap


def shutdown() -> None:
    """Closes every group of this process (collectively: all ranks call it)."""
    for g in list(_state.groups.values()):
        g.close()
    _state.groups.clear()
    _state.controller = None
    _state.store_server = None
    _state.initialized = False


def _c10d_groups() -> List[Any]:
    mod = sys.modules.get(__name__ + ".torch_backend")
    return list(mod._groups) if mod is not None else []


# The torch.distributed backend "cais", when torch and the backend are built.
if os.environ.get("CAIS_NO_TORCH") != "1":
    try:
        import torch  # noqa: F401  (import errors: no torch, numpy-only use)
    except ImportError:
        pass
    else:
        from . import torch_backend  # noqa: F401,E402


@atexit.register
def _release_pending() -> None:
    # Operations still in flight at exit keep writing their buffers until
    # they complete: wait for them before the interpreter frees the memory.
    for g in list(_state.groups.values()):
        g._drain()
    # torch groups never destroyed: their delegated Gloo group's worker
    # threads must be gone before the interpreter finalizes.
    for pg in _c10d_groups():
        pg._release_delegate()
