"""The process's CAIS context (cais.init, cais.shutdown): who this rank is,
where the switch, the controller and the rendezvous store are, and the
groups it has made. Private to the cais package; its names are re-exported
by cais/__init__.py."""

from __future__ import annotations

import datetime
import os
from typing import Any, Dict, Optional

from . import _cais
from ._settings import env_setting

WORLD_GROUP_ID = 255
"""Switch group id of the implicit world group (collectives without group=)."""
DEFAULT_CONTROLLER_PORT = 50051
DEFAULT_SWITCH_PORT = 9410


class State:
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
        self.groups: Dict[int, Any] = {}  # group id -> cais.Group
        # On rank 0: the rendezvous store every group of this job meets in.
        self.store_server: Optional[Any] = None


state = State()


def env_int(name: str) -> Optional[int]:
    v = os.environ.get(name)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError("environment variable %s=%r is not an integer" % (name, v)) from None


def split_host_port(addr: str, default_port: int) -> tuple:
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
    if state.initialized:
        raise RuntimeError("cais.init() was already called in this process; call cais.shutdown() "
                           "first to re-initialise")
    r = rank if rank is not None else env_int("RANK")
    w = world_size if world_size is not None else env_int("WORLD_SIZE")
    if r is None or w is None:
        raise ValueError("cais.init: rank and world size unknown: pass rank= and world_size=, or "
                         "run under torchrun (which sets RANK and WORLD_SIZE)")
    if not 0 <= r < w:
        raise ValueError("cais.init: rank %d must be in [0, world_size=%d)" % (r, w))
    tok = token if token is not None else os.environ.get("INCA_TOKEN", "")
    _cais.validate_token(tok, "token=" if token is not None else "INCA_TOKEN")
    state.rank, state.world_size = int(r), int(w)
    state.master_addr = master_addr or os.environ.get("MASTER_ADDR") or "127.0.0.1"
    mp = master_port if master_port is not None else env_int("MASTER_PORT")
    state.master_port = int(mp) if mp is not None else 29500
    state.bind_ip = bind_ip or os.environ.get("INCA_BIND_IP") or "127.0.0.1"
    if offload is None:  # INCA_OFFLOAD, as the setting declares it
        offload = env_setting("offload") is not False
    state.offload = bool(offload)
    state.token = tok
    if require_switch is None:  # INCA_REQUIRE_SWITCH
        require_switch = env_setting("require_switch")
    state.require_switch = bool(require_switch)
    state.host_timeout_ms = None
    if timeout is not None:
        ms = int(timeout.total_seconds() * 1000)
        if ms <= 1000:
            raise ValueError("cais.init: timeout must be longer than 1 s (the switch path's own "
                             "timeout), got %r" % (timeout,))
        state.host_timeout_ms = ms
    state.controller = None
    state.controller_host = None
    if controller_addr:
        connect_controller(controller_addr)
    if switch_addr is None:
        switch_addr = os.environ.get("INCA_SWITCH")
    if switch_addr is None:
        host = state.controller_host or "127.0.0.1"
        switch_addr = "%s:%d" % (host, DEFAULT_SWITCH_PORT)
    state.switch_address = "" if switch_addr == "none" else switch_addr
    state.store_server = None
    if state.rank == 0:
        address = world_store()
        try:
            state.store_server = _cais.serve_store(address)
        except RuntimeError as e:
            raise RuntimeError("cais.init: rank 0 cannot serve the rendezvous store on %s "
                               "(master_addr:master_port + 1): %s" % (address, e)) from None
    state.initialized = True


def world_store() -> str:
    return "%s:%d" % (state.master_addr, state.master_port + 1)


def connect_controller(addr: str) -> None:
    host, port = split_host_port(addr, state.controller_port)
    target = "%s:%d" % (host, port)
    c = _cais.Control(target, state.token)
    c.health()  # ConnectionError saying what to check when the switch is not there
    state.controller, state.controller_host = c, host


def is_initialized() -> bool:
    return state.initialized


def require_init() -> None:
    if not state.initialized:
        raise RuntimeError("cais.init() has not been called in this process: call "
                           "cais.init(controller_addr=...) first (rank and world size come from "
                           "its arguments or from RANK/WORLD_SIZE)")


def get_rank() -> int:
    require_init()
    return state.rank


def get_world_size() -> int:
    require_init()
    return state.world_size


def shutdown() -> None:
    """Closes every group of this process (collectively: all ranks call it)."""
    for g in list(state.groups.values()):
        g.close()
    state.groups.clear()
    state.controller = None
    state.store_server = None
    state.initialized = False
