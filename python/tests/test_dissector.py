"""tools/wireshark/inca.lua on real captures (Debian's dumpcap and tshark): a job
through inca-switchd decodes with every CAIS field named (the write-up's 5.1
step: check group_id, layer_id, chunk_id), and every seed-corpus datagram of
CAIS, management and OLAF decodes, malformed ones with the parser's error name."""
import glob
import os
import select
import signal
import socket
import subprocess

import cais.launch as launch
from conftest import HERE, run

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
LUA = os.path.join(ROOT, "tools", "wireshark", "inca.lua")
CAPTURE_TIMEOUT_S = 120


class Capture:
    """tshark capturing on loopback for one UDP port, until stop(); bounded in
    time. Ready once a probe datagram (to a port of its own, filtered out of
    the decode) shows up in tshark's live output: the capture's filter is then
    active, which dumpcap's 'Capturing on' line does not guarantee."""

    def __init__(self, port: int, path: str) -> None:
        self.path, self.port = path, port
        self.probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.probe.bind(("127.0.0.1", 0))
        self.probe_port = self.probe.getsockname()[1]
        self.proc = subprocess.Popen(
            ["tshark", "-i", "lo", "-f", "udp port %d or udp port %d" % (port, self.probe_port),
             "-w", path, "-P", "-l", "-a", "duration:%d" % CAPTURE_TIMEOUT_S],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._handshake(77)

    def _handshake(self, length: int) -> None:
        # A probe of a length nothing else has, repeated until tshark has
        # printed it: everything sent before it has then been captured.
        marker = b"inca-capture-probe".ljust(length, b".")
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for _ in range(500):  # at most 500 probes, 20 ms apart: 10 s
            tx.sendto(marker, ("127.0.0.1", self.probe_port))
            while True:
                ready, _, _ = select.select([self.proc.stdout], [], [], 0.02)
                if not ready:
                    break
                line = self.proc.stdout.readline()
                if not line:
                    break
                if "Len=%d" % len(marker) in line:
                    return
        self.proc.kill()
        raise AssertionError("tshark did not capture its probe on lo within 10 s")

    def stop(self) -> None:
        self._handshake(78)
        self.proc.send_signal(signal.SIGINT)
        self.proc.communicate(timeout=30)
        self.probe.close()


def decode(path: str, port: int, fields, display_filter: str = ""):
    cmd = ["tshark", "-X", "lua_script:" + LUA, "-d", "udp.port==%d,cais" % port, "-r", path,
           "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]
    for f in fields:
        cmd += ["-e", f]
    only_port = "udp.port == %d" % port  # not the capture's probes
    cmd += ["-Y", "(%s) && (%s)" % (only_port, display_filter) if display_filter else only_port]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [line.split("|") for line in out.stdout.splitlines() if line.strip()]


def test_a_real_job_decodes_with_every_field_named(switch, tmp_path):
    port = int(switch.data_addr.rsplit(":", 1)[1])
    cap = Capture(port, str(tmp_path / "job.pcapng"))
    try:
        run("tagged", 2, {"INCA_SWITCH": switch.data_addr})
    finally:
        cap.stop()
    rows = decode(cap.path, port, ["cais.op_type", "cais.group_id", "cais.layer_id",
                                   "cais.chunk_id", "cais.total_chunks", "cais.seq_num",
                                   "cais.kind", "cais_mgmt.type"])
    assert rows, "nothing captured"
    mgmt = [r for r in rows if r[7]]
    data = [r for r in rows if r[0]]
    assert any(r[7] == "1" for r in mgmt), "no JOIN decoded"
    assert any(r[7] == "2" for r in mgmt), "no JOIN_REPLY decoded"
    assert any(r[7] == "7" for r in mgmt), "no REPORT decoded (rank 0 reports operation times)"
    # The tagged operations of the scenario: all-reduce on layer 5, reduce-scatter on 9.
    layers = {(r[0], r[2]) for r in data}
    assert ("0", "5") in layers and ("3", "9") in layers, layers
    kinds = {r[6] for r in data}
    assert {"contribution", "result", "ack"} <= kinds, kinds
    for r in data:
        assert r[1] == "255" and int(r[3]) < int(r[4]), r  # the world group; chunk < total
    errors = decode(cap.path, port, ["frame.number"], "_ws.expert.severity == error")
    assert errors == [], "malformed packets in a real job: %r" % errors


# Corpus file -> the error name the dissector must report (as ParseCais names it).
CAIS_ERRORS = {
    "err_bad_version": "bad_version", "err_chunk_eq_total": "chunk_out_of_range",
    "err_empty_payload": "empty_payload", "err_misaligned_f16": "payload_misaligned",
    "err_misaligned_f32": "payload_misaligned", "err_payload_len_bigger": "payload_len_mismatch",
    "err_payload_len_smaller": "payload_len_mismatch", "err_too_short_1": "too_short",
    "err_too_short_19": "too_short", "err_total_chunks_zero": "chunk_out_of_range",
    "err_unknown_dtype": "unknown_dtype", "err_unknown_flags": "unknown_flags",
    "err_unknown_op": "unknown_op", "err_unknown_reduce_op": "unknown_reduce_op",
    "mgmt_bad_count": "rank_port_count", "mgmt_bad_advice": "bytes 26-31",
}
OLAF_ERRORS = {
    "err_bad_version": "bad_version", "err_payload_len_mismatch": "payload_len_mismatch",
    "err_too_short": "too_short", "err_unknown_type": "unknown_type",
}


def test_every_corpus_datagram_decodes(tmp_path):
    files = sorted(glob.glob(os.path.join(ROOT, "src", "wire", "corpus", "cais", "*")))
    olaf = sorted(glob.glob(os.path.join(ROOT, "src", "olaf", "corpus", "wire", "*")))
    files += [f for f in olaf if not f.endswith("err_not_olaf")]
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    port = sink.getsockname()[1]
    cap = Capture(port, str(tmp_path / "corpus.pcapng"))
    try:
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for f in files:
            with open(f, "rb") as fh:
                tx.sendto(fh.read(), ("127.0.0.1", port))
            sink.recv(70000)  # in order, and all of it arrived
    finally:
        cap.stop()
    rows = decode(cap.path, port, ["frame.number", "_ws.col.Protocol", "_ws.col.Info",
                                   "_ws.expert.message"])
    assert len(rows) == len(files), (len(rows), len(files))
    for f, (_, proto, info, expert) in zip(files, rows):
        name = os.path.basename(f)
        errors = OLAF_ERRORS if "/olaf/" in f else CAIS_ERRORS
        if name in errors:
            assert errors[name] in expert, (name, info, expert)
        else:
            assert expert == "", (name, info, expert)
        want = "OLAF" if "/olaf/" in f else "CAIS-MGMT" if name.startswith("mgmt") else "CAIS"
        assert proto == want, (name, proto)
