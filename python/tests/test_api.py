"""`import cais`: the write-up's API on numpy arrays and torch tensors through inca-switchd."""
import json
import os
import subprocess

import numpy as np
import pytest

import cais
from cais import launch
from conftest import run


@pytest.mark.parametrize("n", [2, 4])
def test_api_collectives_through_switch(switch, n):
    res = run("api", n, {"INCA_SWITCH": switch.data_addr, "CAIS_CONTROLLER": switch.control_addr})
    assert all(r["stats"]["ops_switch"] > 0 for r in res)


def test_errors_say_what_to_do():
    with pytest.raises(RuntimeError, match="cais.init"):
        cais.all_reduce(np.zeros(4, dtype=np.float32))
    with pytest.raises(ValueError, match="unknown key"):
        cais.configure({"chunksize": 4})
    with pytest.raises(ValueError, match="multiple of 4"):
        cais.configure({"chunk_size": 65538})
    with pytest.raises(ValueError, match="controller_addr"):
        cais.configure({"offload_threshold": 0.2})
    with pytest.raises(ValueError, match="controller_addr"):
        cais.configure({"max_pending_chunks": 128})  # the switch's, as in the write-up


def test_switch_keys_are_the_settings_the_switch_declares_run_time():
    # configure() keeps no list of its own: its switch keys are the CAIS
    # settings src/switchd/settings.cc marks run time, as the binary prints them.
    out = subprocess.run([os.path.join(launch.build_dir(), "bin", "inca-switchd"),
                          "--settings-json"], capture_output=True, text=True, check=True).stdout
    declared = {s["key"]: s for s in json.loads(out)}
    runtime = {k for k, s in declared.items() if s["runtime"] and not k.startswith("olaf_")}
    assert cais._SWITCH_KEYS == runtime | {"offload_threshold"}
    assert {"timeout_ms", "lease_ms", "result_hold_ms"} <= runtime
    assert "sram_bytes" in declared and "sram_bytes" not in cais._SWITCH_KEYS  # fixed at start
    with pytest.raises(ValueError, match="controller_addr"):
        cais.configure({"lease_ms": 5000})
    with pytest.raises(ValueError, match="unknown key"):
        cais.configure({"sram_bytes": 1 << 20})
    # Each switch key takes its declared type: a bool setting a bool only.
    with pytest.raises(ValueError, match="advise_window must be True or False, got 1"):
        cais.configure({"advise_window": 1})
    with pytest.raises(ValueError, match="group_share must be a number, got True"):
        cais.configure({"group_share": True})


def test_chunk_size_beyond_one_datagram_is_capped_with_a_warning():
    # Without a controller the cap is the switch's default max payload (8952).
    with pytest.warns(cais.CaisWarning, match="chunk_size 65536"):
        eff = cais.configure({"chunk_size": 65536})
    assert eff["chunk_size"] == 8952
    eff = cais.configure({"chunk_size": 1452, "client_window": 32})
    assert eff["chunk_size"] == 1452 and eff["client_window"] == 32
    cais._state.client.clear()
    with pytest.raises(ValueError, match="RANK"):
        cais.init()


def test_unreachable_controller_is_connection_error(monkeypatch):
    import cais.launch as launch
    port = launch.free_port()
    with pytest.raises(ConnectionError, match="inca-switchd"):
        cais.init(controller_addr="127.0.0.1:%d" % port, rank=0, world_size=1)
    assert not cais.is_initialized()


def test_single_rank_host_only():
    import cais.launch as launch
    cais.init(rank=0, world_size=1, switch_addr="none", master_port=launch.free_port())
    try:
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        assert cais.all_reduce(a) is a
        assert (a == np.arange(6).reshape(2, 3)).all()
        g = cais.all_gather(a)
        assert g.shape == (1, 2, 3)
    finally:
        cais.shutdown()


def test_require_switch_raises_instead_of_running_on_gloo(monkeypatch):
    # Issue 18: INCA_REQUIRE_SWITCH=1 fails fast where the group cannot form on
    # the switch (nothing listens at this address), instead of a silent Gloo run.
    import datetime

    import cais.launch as launch
    monkeypatch.setenv("INCA_REQUIRE_SWITCH", "maybe")
    with pytest.raises(ValueError, match="INCA_REQUIRE_SWITCH='maybe': expected true or false"):
        cais.init(rank=0, world_size=1, switch_addr="127.0.0.1:%d" % launch.free_port())
    assert not cais.is_initialized()
    monkeypatch.setenv("INCA_REQUIRE_SWITCH", "1")
    with pytest.raises(ValueError, match="timeout"):
        cais.init(rank=0, world_size=1, switch_addr="none", timeout=datetime.timedelta(seconds=1))
    cais.init(rank=0, world_size=1, switch_addr="127.0.0.1:%d" % launch.free_port(),
              master_port=launch.free_port(), timeout=datetime.timedelta(minutes=30))
    try:
        cais.configure({"join_timeout_ms": 200})
        with pytest.raises(RuntimeError, match="INCA_REQUIRE_SWITCH is set"):
            cais.all_reduce(np.ones(4, dtype=np.float32))
    finally:
        cais._state.client.clear()
        cais.shutdown()


def test_client_variables_are_read_as_their_settings_declare(monkeypatch, switch):
    # INCA_OFFLOAD, INCA_REQUIRE_SWITCH and INCA_IO are declared with their
    # settings (src/client/settings.cc): the package and the C++ bindings read
    # them from that declaration, booleans as true/false, yes/no, on/off, 1/0.
    import cais.launch as launch
    monkeypatch.setenv("INCA_OFFLOAD", "bogus")
    with pytest.raises(ValueError, match="INCA_OFFLOAD='bogus': expected true or false"):
        cais.init(rank=0, world_size=1, switch_addr="none")
    assert not cais.is_initialized()
    # A switch is there, but INCA_OFFLOAD=off starts on the host path.
    monkeypatch.setenv("INCA_OFFLOAD", "off")
    cais.init(rank=0, world_size=1, switch_addr=switch.data_addr, master_port=launch.free_port())
    try:
        cais.all_reduce(np.ones(4, dtype=np.float32))
        s = cais.stats()
        assert s["ops_host"] == 1 and s["ops_switch"] == 0, s
    finally:
        cais.shutdown()
    monkeypatch.delenv("INCA_OFFLOAD")
    # INCA_IO reaches the C++ options (the package never names it).
    monkeypatch.setenv("INCA_IO", "fast")
    cais.init(rank=0, world_size=1, switch_addr=switch.data_addr, master_port=launch.free_port())
    try:
        with pytest.raises(ValueError, match="INCA_IO='fast': unknown value 'fast'; use gso or mmsg"):
            cais.all_reduce(np.ones(4, dtype=np.float32))
    finally:
        cais.shutdown()


def test_a_token_that_is_not_printable_ascii_is_a_value_error(monkeypatch):
    # Issue 46: gRPC aborted the interpreter on such a token; the rule is the control
    # API's own (ValidateControlToken), checked where the token enters.
    for bad in ("sekret\n", "a\rb", "x\x7f", "gr\u00fcn"):
        with pytest.raises(ValueError, match="printable ASCII"):
            cais.init(rank=0, world_size=1, switch_addr="none", token=bad)
    monkeypatch.setenv("INCA_TOKEN", "sekret\n")
    with pytest.raises(ValueError, match="INCA_TOKEN"):
        cais.init(rank=0, world_size=1, switch_addr="none")
