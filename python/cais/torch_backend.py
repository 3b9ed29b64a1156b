"""The torch.distributed backend "cais", registered when `cais` is imported.

    import torch.distributed as dist
    import cais  # registers the backend
    dist.init_process_group("cais")   # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT as for gloo
    dist.all_reduce(t)                # through the switch, Gloo behind it

Environment: INCA_SWITCH (switch address, default 127.0.0.1:9410, "none" =
host path only), INCA_OFFLOAD=0 (start on the host path), INCA_BIND_IP
(local address for inca's sockets, default 127.0.0.1), CAIS_GROUP_BASE
(switch group ids of torch process groups: base + n for the n-th group
created, default 128; set it apart per job sharing a switch).

allreduce/allgather/broadcast/barrier of float32/float16/bfloat16/int32 go
through inca; everything else is delegated to a ProcessGroupGloo on the same
store (src/python/c10d_backend.cc).
"""

from __future__ import annotations

import os
import weakref
import zlib
from typing import Any, List, Tuple

import torch.distributed as dist

from . import _cais_c10d

# Live "cais" process groups, for cais.set_offload() and the exit hook; weak, so
# that destroy_process_group() destroys a group then, while its peers are there.
_groups: "weakref.WeakSet[Any]" = weakref.WeakSet()

_STORE_KEY = "cais/inca_store"
_STORE_ERROR = "error: "  # rank 0 publishes this prefix, and why, when it cannot serve


def _rendezvous_store(store: Any, rank: int, bind_ip: str, host: str) -> Tuple[str, Any]:
    """inca's own rendezvous store (for its Gloo mesh): group rank 0 serves it
    on a port the kernel picks, and publishes host:port through torch's store
    only once it is bound, so no other socket can take the port in between.
    If rank 0 cannot serve it, it publishes the reason instead, and every rank
    raises it at once rather than waiting out torch's timeout.
    Returns (address, the server on rank 0 or None)."""
    server = None
    if rank == 0:
        try:
            server = _cais_c10d.serve_store("%s:0" % bind_ip)
        except RuntimeError as e:
            store.set(_STORE_KEY, _STORE_ERROR + str(e))
            raise RuntimeError("cais backend: group rank 0 cannot serve inca's store on "
                               "%s: %s (INCA_BIND_IP)" % (bind_ip, e)) from None
        store.set(_STORE_KEY, "%s:%d" % (host, server.port))
    published = store.get(_STORE_KEY).decode()
    if published.startswith(_STORE_ERROR):
        raise RuntimeError("cais backend: group rank 0 could not serve inca's store: "
                           + published[len(_STORE_ERROR):])
    return published, server


def _group_id(name: str) -> int:
    base = int(os.environ.get("CAIS_GROUP_BASE", "128"))
    try:
        n = int(name)
    except ValueError:
        n = zlib.crc32(name.encode())
    gid = base + n % 64
    if not 0 <= gid <= 254:
        raise ValueError("CAIS_GROUP_BASE=%d puts switch group ids outside 0..254" % base)
    return gid


def _client_settings() -> dict:
    import cais  # configure()'s client keys apply to torch groups too
    return dict(cais._state.client)


def _create(opts: Any, pg_options: Any = None) -> Any:
    """torch's extended creator: opts has store, group_rank, group_size, timeout, group_id."""
    store, rank, size, timeout = opts.store, opts.group_rank, opts.group_size, opts.timeout
    bind_ip = os.environ.get("INCA_BIND_IP", "127.0.0.1")
    gloo = dist.ProcessGroupGloo(dist.PrefixStore("cais/gloo/", store), rank, size, timeout)
    store_address, store_server = _rendezvous_store(
        store, rank, bind_ip, os.environ.get("INCA_STORE_HOST") or bind_ip)
    switch = os.environ.get("INCA_SWITCH", "127.0.0.1:9410")
    options = dict(
        group_id=_group_id(str(opts.group_id)),
        switch_address="" if switch == "none" else switch,
        store_address=store_address,
        serve_store=False,  # rank 0's is store_server, which the group then owns
        own_store=True,  # one per torch group: other group ids there disagree
        bind_ip=bind_ip,
        # INCA_OFFLOAD, INCA_REQUIRE_SWITCH and INCA_IO: the binding reads
        # them as their settings declare (src/client/settings.cc).
    )
    # torch's timeout= (30 min by default) bounds inca's waits on its peers
    # too, as it bounds Gloo's.
    timeout_ms = int(timeout.total_seconds() * 1000)
    if timeout_ms > 1000:
        options["host_timeout_ms"] = timeout_ms
    options.update(_client_settings())
    try:
        pg = _cais_c10d.create(rank, size, options, gloo, store_server)
    except BaseException:
        store_server = None  # closes rank 0's store now: peers waiting on it fail at once
        raise
    _groups.add(pg)
    return pg


def process_groups() -> List[Any]:
    """The process groups of backend "cais" this process has made and still holds."""
    return list(_groups)


if "CAIS" not in dist.Backend._plugins:
    dist.Backend.register_backend("cais", _create, extended_api=True)
