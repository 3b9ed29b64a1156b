"""cais.configure and cais.switch_stats: the write-up's settings, the
client's for groups created from now on and the switch's through the
control API. Private to the cais package."""

from __future__ import annotations

import warnings
from typing import Any, Dict

from ._buffers import CaisWarning
from ._context import connect_controller, require_init, state
from ._settings import CLIENT_KEYS, CLIENT_OPTION, SWITCH_KEYS, SWITCH_SETTINGS, client_value

ALL_KEYS = CLIENT_KEYS | SWITCH_KEYS | {"controller_port"}
# The largest chunk one UDP datagram carries (65,507 bytes less the 20-byte
# CAIS header, rounded down to whole 4-byte elements).
MAX_CHUNK_BYTES = 65472
# inca-switchd's default max_payload_bytes: a 9000-byte jumbo frame less the
# IPv4, UDP and CAIS headers.
DEFAULT_SWITCH_PAYLOAD = 8952


def switch_stats() -> Dict[str, Any]:
    """The switch's counters through the controller (needs init(controller_addr=...))."""
    require_init()
    if state.controller is None:
        raise RuntimeError("cais.switch_stats needs the control plane: pass controller_addr to "
                           "cais.init")
    return state.controller.stats()


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
        advise_window (True/False), result_hold_ms, lease_ms: the switch's run-time settings,
        set at once through the controller (init(controller_addr=...)); offload_threshold 1:
        all on the host path.
    switch_timeout_ms, join_timeout_ms, client_window (chunks in flight per
        rank): inca's client settings, for groups created from now on.
    controller_port: the control API's port (default 50051), reconnects if needed.
    May be called before init() for client keys and controller_port.
    """
    if not isinstance(config, dict):
        raise TypeError("cais.configure takes a dict, e.g. {'chunk_size': 65536}")
    unknown = sorted(set(config) - ALL_KEYS)
    if unknown:
        raise ValueError("cais.configure: unknown key(s) %s; known: %s"
                         % (", ".join(unknown), ", ".join(sorted(ALL_KEYS))))
    client = {CLIENT_OPTION[k]: client_value(k, config[k]) for k in CLIENT_KEYS & set(config)}
    switch = {k: config[k] for k in SWITCH_KEYS & set(config)}
    for k, v in switch.items():
        if SWITCH_SETTINGS[k]["type"] == "bool":
            if not isinstance(v, bool):
                raise ValueError("cais.configure: %s must be True or False, got %r" % (k, v))
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError("cais.configure: %s must be a number, got %r" % (k, v))
    if switch and (not state.initialized or state.controller is None):
        raise ValueError("cais.configure: %s are switch settings and need the control plane: "
                         "call cais.init(controller_addr='HOST:PORT') first (or use "
                         "`cais-cli configure`)" % ", ".join(sorted(switch)))
    if "controller_port" in config:
        p = config["controller_port"]
        if isinstance(p, bool) or not isinstance(p, int) or not 0 < p < 65536:
            raise ValueError("cais.configure: controller_port must be 1..65535, got %r" % (p,))
        state.controller_port = p
        if state.controller is not None and state.controller_host is not None:
            connect_controller("%s:%d" % (state.controller_host, p))
    if "chunk_size" in client:
        client["chunk_size"] = chunk_size_for(client["chunk_size"])
    existing = list(state.groups.values())
    if client and existing:
        warnings.warn("cais.configure: %s apply to groups created from now on; existing groups "
                      "%r keep their settings" % (", ".join(sorted(client)), existing),
                      CaisWarning, stacklevel=2)
    if switch:
        state.controller.set_config({k: _switch_text(v) for k, v in switch.items()})
    state.client.update(client)
    effective: Dict[str, Any] = {k: state.client[o] for k, o in CLIENT_OPTION.items()
                                 if o in state.client}
    effective["controller_port"] = state.controller_port
    if state.controller is not None:
        cfg = state.controller.get_config()
        for k in SWITCH_KEYS:
            if k in cfg:
                effective[k] = _switch_value(SWITCH_SETTINGS[k]["type"], cfg[k])
    return effective


def _switch_text(v: Any) -> str:
    """A switch setting's value as the control API takes it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(float(v)) if isinstance(v, float) else str(v)


def _switch_value(kind: str, text: str) -> Any:
    """A switch setting's value from the control API's text, by its declared type."""
    if kind == "bool":
        return text.lower() in ("true", "yes", "on", "1")
    return (int if kind == "integer" else float)(text)


def chunk_size_for(requested: int) -> int:
    """The chunk size to use for `requested`: a multiple of 4, at most what
    the switch accepts in one datagram (asked through the controller when
    there is one, else its default) and at most MAX_CHUNK_BYTES."""
    if requested < 4 or requested % 4:
        raise ValueError("cais.configure: chunk_size %d must be a multiple of 4, at least 4 "
                         "(8952 fills a 9000-byte jumbo frame, 1452 a 1500-byte MTU)" % requested)
    cap, source = DEFAULT_SWITCH_PAYLOAD, "the switch's default max_payload_bytes"
    if state.controller is not None:
        try:
            cap = int(state.controller.get_config().get("chunk_size", cap))
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
