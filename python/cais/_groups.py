"""Groups and their operations in flight: cais.Group (new_group's result),
cais.Work (an asynchronous operation), and how a collective finds its
group. Private to the cais package."""

from __future__ import annotations

import collections
import sys
import threading
from typing import Any, Callable, Dict, Iterable, List, Optional

from . import _cais
from ._buffers import Buffer
from ._context import WORLD_GROUP_ID, require_init, state, world_store


class Group:
    """A group of ranks with its own switch group id (new_group's result)."""

    def __init__(self, ranks: List[int], group_id: int, store_address: Optional[str]) -> None:
        self.ranks = list(ranks)
        self.group_id = group_id
        self.rank = self.ranks.index(state.rank)
        self.size = len(self.ranks)
        options = dict(
            rank=self.rank, world_size=self.size, group_id=group_id,
            switch_address=state.switch_address,
            # The job's store (rank 0's, from init), or one of the group's own
            # that its first rank serves.
            store_address=store_address or world_store(),
            serve_store=store_address is not None and self.rank == 0,
            offload=state.offload, bind_ip=state.bind_ip,
            require_switch=state.require_switch)
        if state.host_timeout_ms is not None:
            options["host_timeout_ms"] = state.host_timeout_ms
        options.update(state.client)
        self._comm = _cais.create(options)
        # Operations in flight with the buffers they use, oldest first. A Work
        # the caller drops keeps its entry here, so the memory the operation
        # writes stays alive until it has completed (operations complete in
        # issue order); entries are reaped by later calls, synchronize and close.
        self._pending: Any = collections.deque()
        self._lock = threading.Lock()

    def _issue(self, work: Any, buffers: List["Buffer"], result: Any) -> "Work":
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
    require_init()
    rs = list(range(state.world_size)) if ranks is None else [int(r) for r in ranks]
    if not rs or len(set(rs)) != len(rs) or any(not 0 <= r < state.world_size for r in rs):
        raise ValueError("cais.new_group: ranks %r must be distinct ranks in [0, %d)"
                         % (rs, state.world_size))
    if not 0 <= group_id <= 254:
        raise ValueError("cais.new_group: group_id %d must be 0..254 (255 is the world group)"
                         % group_id)
    if group_id in state.groups:
        raise ValueError("cais.new_group: group_id %d is already in use in this process (%r); "
                         "pick another id" % (group_id, state.groups[group_id]))
    if state.rank not in rs:
        return None
    g = Group(rs, group_id, store_addr)
    state.groups[group_id] = g
    return g


def world() -> Group:
    require_init()
    g = state.groups.get(WORLD_GROUP_ID)
    if g is None:
        g = Group(list(range(state.world_size)), WORLD_GROUP_ID, None)
        state.groups[WORLD_GROUP_ID] = g
    return g


def group_of(group: Optional[Group], group_id: Optional[int] = None) -> Group:
    if group_id is not None:
        # The write-up's form (3.4): cais.all_reduce(t, group_id=0).
        if group is not None and group.group_id != group_id:
            raise ValueError("cais: group=%r and group_id=%d disagree; pass one of them"
                             % (group, group_id))
        require_init()
        g = state.groups.get(group_id)
        if g is None:
            # Every rank makes the same call, so creating the group of all
            # ranks here is as collective as new_group(group_id=...) itself.
            g = world() if group_id == WORLD_GROUP_ID else new_group(group_id=group_id)
        return g
    if group is None:
        return world()
    if not isinstance(group, Group):
        raise TypeError("group must be a cais.Group from cais.new_group(), got %r" % (group,))
    return group


class Work:
    """An asynchronous operation: wait() blocks until it is done, writes back
    any non-contiguous original, and returns the result tensor/array.
    Dropping a Work without wait() is safe: its group keeps the buffers until
    the operation has completed, and writes back then."""

    def __init__(self, work: Any, buffers: List[Buffer], result: Any) -> None:
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


def issue(g: Group, start: Callable[[Any], Any], buffers: List[Buffer], result: Any,
          async_op: bool) -> Any:
    """Starts one operation on g's communicator (`start(communicator)`, which
    returns the native work) and keeps `buffers` alive until it completes;
    a Work when async_op, else the result once done."""
    w = g._issue(start(g._comm), buffers, result)
    return w if async_op else w.wait()


def drain(g: Group) -> None:
    """Waits for g's operations in flight, raising nothing (at exit)."""
    g._drain()


def c10d_groups() -> List[Any]:
    """The torch.distributed process groups of backend "cais" alive now."""
    mod = sys.modules.get(__package__ + ".torch_backend")
    return mod.process_groups() if mod is not None else []
