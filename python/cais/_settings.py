"""configure()'s settings as the C++ tables declare them: the client's
(src/client/settings.cc, the build's _client_settings.json) and the switch's
run-time ones (src/switchd/settings.cc, _switch_settings.json)."""
from __future__ import annotations

import json
import os
from typing import Any, Dict

_HERE = os.path.dirname(os.path.abspath(__file__))


def _client_settings() -> Dict[str, Dict[str, Any]]:
    """The client's settings as src/client/settings.cc declares them (the build's
    _client_settings.json): types, ranges, aliases."""
    path = os.path.join(_HERE, "_client_settings.json")
    with open(path, encoding="utf-8") as f:
        return {s["key"]: s for s in json.load(f)}


_CLIENT_SETTINGS = _client_settings()
# The client settings configure() sets, for groups created from now on, by
# their configure() names (docs/python.md): their own, except where the
# write-up's name means the switch's (its max_pending_chunks: client_window).
CLIENT_OPTION = {"client_window" if k == "max_pending_chunks" else k: k
                  for k in ("chunk_size", "switch_timeout_ms", "join_timeout_ms",
                            "max_pending_chunks", "competitive")}
CLIENT_KEYS = set(CLIENT_OPTION)


_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def env_setting(key: str) -> Any:
    """Client setting `key` from the environment variable its declaration
    names ("env", e.g. INCA_OFFLOAD for offload), read as the C++ side reads
    it (src/util/settings.cc FromEnvironment); None when it declares none or
    the variable is unset or empty. ValueError naming the variable otherwise."""
    spec = _CLIENT_SETTINGS[key]
    name = spec.get("env")
    text = os.environ.get(name, "") if name else ""
    if not text:
        return None
    if spec["type"] == "bool":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError("%s='%s': expected true or false, got '%s'" % (name, text, text))
    if spec["type"] == "choice" and text not in spec["choices"]:
        raise ValueError("%s='%s': unknown value '%s'; use %s" % (
            name, text, text, " or ".join(spec["choices"])))
    return text


def _switch_settings() -> Dict[str, Dict[str, Any]]:
    """Run-time CAIS switch settings as src/switchd/settings.cc declares them (the build's
    _switch_settings.json), plus the control API's own offload_threshold."""
    path = os.path.join(_HERE, "_switch_settings.json")
    with open(path, encoding="utf-8") as f:
        out = {s["key"]: s for s in json.load(f)
               if s["runtime"] and not s["key"].startswith("olaf_")}
    out["offload_threshold"] = {"key": "offload_threshold", "type": "number", "runtime": True}
    return out


SWITCH_SETTINGS = _switch_settings()
SWITCH_KEYS = set(SWITCH_SETTINGS)


def client_value(name: str, v: Any) -> Any:
    """`v` checked against the declared type and range of client setting `name`
    (chunk_size's upper bound is _chunk_size's: it caps, with a warning)."""
    spec = _CLIENT_SETTINGS[CLIENT_OPTION[name]]
    if spec["type"] == "bool":
        if not isinstance(v, bool):
            raise ValueError("cais.configure: %s must be True or False, got %r" % (name, v))
        return v
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError("cais.configure: %s must be a non-negative integer, got %r" % (name, v))
    if name != "chunk_size" and not spec["lo"] <= v <= spec["hi"]:
        raise ValueError("cais.configure: %s %d out of range [%d, %d] (%s)"
                         % (name, v, spec["lo"], spec["hi"], spec["unit"] or "count"))
    return v
