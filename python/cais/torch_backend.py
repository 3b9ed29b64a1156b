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
import random
import socket
import weakref
import zlib
from typing import Any, Optional, Tuple

import torch.distributed as dist

from . import _cais_c10d

# Live "cais" process groups, for cais.set_offload() and the exit hook; weak, so
# that destroy_process_group() destroys a group then, while its peers are there.
_groups: "weakref.WeakSet[Any]" = weakref.WeakSet()

_STORE_KEY = "cais/inca_store"


def _ephemeral_ports() -> Tuple[int, int]:
    """The kernel's ephemeral port range (what connect() and bind to port 0 draw from)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the store server binds
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _free_port(host: str, rng: Optional[random.Random] = None) -> int:
    """A port for inca's store that nothing is bound to now, drawn below the
    kernel's ephemeral range. Group rank 0 binds it only after publishing it,
    and a port from bind(0) is an ephemeral one that an outgoing connection
    can take meanwhile (it happened in CI: the store's bind failed with
    "Address already in use"); outgoing connections never take a port below
    that range. Falls back to bind(0) if 64 draws are all taken."""
    host = host if host not in ("", "localhost") else "127.0.0.1"
    rng = rng or random.SystemRandom()
    lo, _ = _ephemeral_ports()
    first = max(1024, lo - 16384)
    if lo - first >= 64:
        for _ in range(64):
            port = rng.randrange(first, lo)
            if _bindable(host, port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


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
    # inca's own rendezvous store (for its Gloo mesh), served by group rank 0
    # on a free port that it publishes through torch's store; chosen after
    # the Gloo group above has made its connections.
    if rank == 0:
        host = os.environ.get("INCA_STORE_HOST") or bind_ip
        store.set(_STORE_KEY, "%s:%d" % (host, _free_port(bind_ip)))
    store_address = store.get(_STORE_KEY).decode()
    switch = os.environ.get("INCA_SWITCH", "127.0.0.1:9410")
    options = dict(
        group_id=_group_id(str(opts.group_id)),
        switch_address="" if switch == "none" else switch,
        store_address=store_address,
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
    pg = _cais_c10d.create(rank, size, options, gloo)
    _groups.add(pg)
    return pg


if "CAIS" not in dist.Backend._plugins:
    dist.Backend.register_backend("cais", _create, extended_api=True)
