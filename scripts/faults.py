#!/usr/bin/python3
"""The fault suite (issue 18): one real job on the testbed, one fault.

    sudo scripts/faults.py                # every fault; rewrites docs/reliability.md
    sudo scripts/faults.py --only rank_stopped,slot_flood --no-write
    sudo scripts/faults.py --only child_hostile   # that row replaced in the docs

Each row builds a testbed (4 hosts, 500 Mbit/s, MTU 9000; docs/testbed.md),
starts inca-switchd in its switch namespace with default flags, and runs one
job: a cais-perf rank per host namespace doing 1 MiB f32 all-reduces, every
result checked exactly, for a fixed time. The fault starts 3 s after the
launch (inside the timed loop). Reported per fault:

- outcome: "exact" when every rank exited 0 with no wrong element, else the
  error the ranks gave (their last stderr line) and how long after the
  fault they gave it;
- stall: the longest gap between two operations that ended after the fault
  (the time the job made no progress), against the median gap;
- ops: timed operations completed, and on which path (cais-perf's path
  column: switch, or host/mixed when some ran on Gloo);
- lost: wrong elements and failed operations.

The tree rows (leaf_killed, leaf_stopped, root_killed, root_restart) run
the same job on a two-tier testbed instead: 2 racks x 2 hosts, each rack's
leaf inca-switchd, the root and the aggregation manager in the spine
(inca_testbed.tree.TreeNetwork), uplinks at 1 Gbit/s; each rank JOINs its
own leaf. After root_restart a second, short job runs: the path it took
says whether the tree came back. child_hostile runs two jobs of two ranks
on 4 racks x 1 host, their trees sharing the root, while a process in rack
1's leaf namespace forges datagrams from the leaf's own address and port
(raw IPv4, so the root cannot tell them from the leaf's): for each partial
the leaf sends up for its group, the same chunk of the next operation 4
bytes short, and a well-formed partial for the other group.

Results go to docs/eval/faults.json and the table in docs/reliability.md
(between its markers). Bounded: every job has a timeout, every flood a
duration.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
from typing import Dict, List, Optional

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from inca_testbed import net, tree  # noqa: E402
from inca_testbed.net import REPO, STATE_DIR, LinkShape, Testbed, TestbedError  # noqa: E402
from inca_testbed.racks import RackTestbed  # noqa: E402

FAULT_AT_S = 3.0
RUN_MS = 9000
RATE = "500mbit"
UPLINK_RATE = "1gbit"
HOSTS = 4
NEXT_RUN_MS = 3000  # the job after a restart

# Wire formats, as docs/protocol.md gives them (management version 2).
MGMT = struct.Struct(">BBBBIBBHHHIHHQI")
MGMT_VERSION = 3  # include/inca/wire/mgmt.h kMgmtVersion
CAIS = struct.Struct(">BBHHHIIBBBB")


def _bins() -> Dict[str, str]:
    build = os.environ.get("INCA_BUILD_DIR") or os.path.join(REPO, "build", "release")
    b = {k: os.path.join(build, "bin", k) for k in ("cais-perf", "inca-switchd",
                                                     "inca-controller")}
    b["build"] = build
    for path in b.values():
        if not os.path.exists(path):
            raise TestbedError("%s not found: build it (scripts/setup.sh) or set INCA_BUILD_DIR"
                               % path)
    return b


class Switch:
    """inca-switchd in the testbed's switch namespace, restartable."""

    def __init__(self, tb: Testbed, path: str, extra: List[str]) -> None:
        self.tb, self.path, self.extra = tb, path, extra
        self.addr = "%s:9410" % tb.switch_ip
        self.log = os.path.join(STATE_DIR, tb.name + "-faults-switchd.log")
        open(self.log, "w").close()
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0

    def start(self) -> None:
        with open(self.log, "a") as log:
            self.proc = self.tb.popen(
                self.tb.switch_ns,
                [self.path, "--listen", self.addr, "--control-listen", self.tb.switch_ip + ":50051",
                 "--http-listen", self.tb.switch_ip + ":9411"] + self.extra,
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise TestbedError("inca-switchd exited: %s" % open(self.log).read()[-2000:])
            if open(self.log).read().count("event=switch_started") >= self.starts + 1:
                self.starts += 1
                return
            time.sleep(0.02)  # polling its log for readiness, bounded above
        raise TestbedError("inca-switchd did not start within 10 s")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def launch(tb: Testbed, perf: str, switch_of, port: int, run_ms: int = RUN_MS,
           hosts: Optional[List[int]] = None, group: int = 0) -> List[subprocess.Popen]:
    """One job: its rank r on hosts[r] (every host by default), JOINing
    switch_of(host) (its leaf in a tree), as switch group `group`."""
    hosts = list(range(HOSTS)) if hosts is None else hosts
    procs = []
    for r, h in enumerate(hosts):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(len(hosts)),
                   MASTER_ADDR=tb.host_ip(hosts[0]), MASTER_PORT=str(port),
                   INCA_SWITCH=switch_of(h), INCA_BIND_IP=tb.host_ip(h))
        argv = [perf, "--op", "allreduce", "-b", "1M", "-e", "1M", "--iters", "1", "--warmup",
                "3", "--duration-ms", str(run_ms), "--json", "--timeout-s", "120",
                "--group-id", str(group)]
        procs.append(tb.popen(tb.host_ns(h), argv, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True))
    return procs


# ---- floods (run in a host namespace: `faults.py _flood KIND ...`)

def flood_joins(switch: str, seconds: float) -> None:
    """300 source ports, each re-sending a JOIN for a group of 8 that never
    completes (groups 100..249), once a second: a flood that renews its
    leases."""
    host, port = switch.rsplit(":", 1)
    to = (host, int(port))
    socks = []
    for k in range(300):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        socks.append(s)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for k, s in enumerate(socks):
            msg = MGMT.pack(0xCA, MGMT_VERSION, 1, 0, k, 100 + k % 150, 0, k % 8, 8, 0xFFFF, 0, 0, 0,
                            0xF100D, 0)
            try:
                s.sendto(msg, to)
                while True:
                    s.recv(2048)  # drain replies
            except BlockingIOError:
                pass
        time.sleep(1.0)  # the flood's own period: renews every lease


def flood_slots(switch: str, seconds: float) -> None:
    """A group of two (group 200) formed by two sockets, then one member
    opening new slots as fast as it can while the other never contributes:
    each slot waits for the switch's chunk timeout."""
    host, port = switch.rsplit(":", 1)
    to = (host, int(port))
    a, b = (socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2))
    for s in (a, b):
        s.settimeout(0.05)
    job = random.getrandbits(63)
    seq_base = None
    deadline = time.monotonic() + 10
    while seq_base is None and time.monotonic() < deadline:
        for rank, s in enumerate((a, b)):
            s.sendto(MGMT.pack(0xCA, MGMT_VERSION, 1, 0, 1, 200, 0, rank, 2, 0xFFFF, 0, 0, 0, job, 0), to)
        for s in (a, b):
            try:
                d = s.recv(2048)
            except socket.timeout:
                continue
            f = MGMT.unpack_from(d)
            if f[2] == 2 and f[3] == 0:
                seq_base = f[10]
    if seq_base is None:
        raise SystemExit("slot flood: group 200 did not form")
    a.setblocking(False)
    payload = bytes(8952)
    end, n, next_ping = time.monotonic() + seconds, 0, 0.0
    while time.monotonic() < end:
        now = time.monotonic()
        if now >= next_ping:  # keep the flood's own group alive
            for rank, s in enumerate((a, b)):
                s.sendto(MGMT.pack(0xCA, MGMT_VERSION, 3, 0, 2, 200, 0, rank, 2, 0xFFFF, 0, 0, 0, 0, 0), to)
            next_ping = now + 1.0
        for _ in range(64):
            chunk = n % 65535
            hdr = CAIS.pack(0, 200, 1, chunk, 65535, (seq_base + n // 65535) & 0xFFFFFFFF,
                            len(payload), 1, 0, 0, 0)
            try:
                a.sendto(hdr + payload, to)
            except BlockingIOError:
                break
            n += 1
        time.sleep(0.001)  # a few thousand slots a second, as in the issue


# ---- a hostile child switch (run in a leaf's namespace: `faults.py _forge ...`)

FORGED_IP_ID = 0xBEEF  # marks the forger's own datagrams, which it sees on up0 too


def _ip_udp(src: tuple, dst: tuple, payload: bytes) -> bytes:
    """An IPv4 + UDP datagram from src to dst (the kernel fills the IP
    checksum; a UDP checksum of 0 means none, as IPv4 allows)."""
    udp = struct.pack(">HHHH", src[1], dst[1], 8 + len(payload), 0) + payload
    return struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), FORGED_IP_ID, 0, 64,
                       socket.IPPROTO_UDP, 0, socket.inet_aton(src[0]),
                       socket.inet_aton(dst[0])) + udp


def forge(leaf: str, root: str, own: int, other: int, seconds: float) -> None:
    """A buggy or hostile child: from its leaf's own address and port (raw
    IPv4, so the root cannot tell it from the leaf), for each partial the
    leaf sends up for group `own`, the same chunk of the next operation
    with 4 bytes too few (a misshapen partial that arrives before the real
    one), and a well-formed partial for group `other`, whose tree the leaf
    is not part of. Prints what it sent."""
    src = (leaf.rsplit(":", 1)[0], int(leaf.rsplit(":", 1)[1]))
    dst = (root.rsplit(":", 1)[0], int(root.rsplit(":", 1)[1]))
    # ETH_P_ALL: a tap of one protocol sees no outgoing packets
    sniff = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(3))
    sniff.bind(("up0", 3))
    sniff.settimeout(0.1)
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    sent = {"misshapen": 0, "other_group": 0}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            pkt = sniff.recv(65535)
        except socket.timeout:
            continue
        if (len(pkt) < 48 or pkt[0] >> 4 != 4 or pkt[9] != socket.IPPROTO_UDP
                or pkt[4:6] == b"\xbe\xef"):
            continue
        ihl = (pkt[0] & 0x0F) * 4
        sport, dport = struct.unpack_from(">HH", pkt, ihl)
        if (sport, dport) != (src[1], dst[1]):
            continue
        # The leaf sends with UDP GSO, so the tap sees a train of datagrams
        # (each its CAIS header and payload) in one: take them one by one.
        at, stop = ihl + 8, len(pkt)
        while at + CAIS.size <= stop:
            f = list(CAIS.unpack_from(pkt, at))
            # op_type, group, layer, chunk, total, seq, payload_len, version, flags, rop|dt, block
            body = pkt[at + CAIS.size:at + CAIS.size + f[6]]
            at += CAIS.size + f[6]
            if f[1] != own or f[8] != 0 or f[6] < 8 or len(body) != f[6]:
                continue
            f[5] = (f[5] + 1) & 0xFFFFFFFF  # the next operation: there before the leaf's own
            f[6] -= 4
            raw.sendto(_ip_udp(src, dst, CAIS.pack(*f) + body[:-4]), (dst[0], 0))
            f[1], f[6] = other, f[6] + 4
            raw.sendto(_ip_udp(src, dst, CAIS.pack(*f) + body), (dst[0], 0))
            sent["misshapen"] += 1
            sent["other_group"] += 1
    print(json.dumps(sent), flush=True)


# ---- one scenario

def run_hostile_child(bins: Dict[str, str]) -> dict:
    """4 racks x 1 host, two jobs of two ranks whose trees share the root:
    group 1 on racks 0-1, group 2 on racks 2-3. From the fault on, for 3 s,
    rack 1's leaf address forges misshapen partials for group 1 and
    partials for group 2 (`forge`)."""
    shape = LinkShape(rate=RATE, burst="256kb", latency="20ms")
    uplink = LinkShape(rate=UPLINK_RATE, burst="256kb", latency="20ms")
    tb = RackTestbed("flt", HOSTS, HOSTS, shape=shape, uplink_shape=uplink,
                     owner_pid=os.getpid())
    res: dict = {"fault": "child_hostile"}
    with tb:
        with tree.TreeNetwork(tb, bins["build"], "flt", ["--offload-controller", "off"]):
            def switch_of(h: int) -> str:
                return "%s:%d" % (tb.leaf_ip(tb.rack_of(h)), tree.DATA_PORT)
            port = 29500 + (os.getpid() % 1000) * 4
            t_launch = time.monotonic()
            own = launch(tb, bins["cais-perf"], switch_of, port, hosts=[0, 1], group=1)
            other = launch(tb, bins["cais-perf"], switch_of, port + 1, hosts=[2, 3], group=2)
            time.sleep(max(0.0, t_launch + FAULT_AT_S - time.monotonic()))  # the fault's time
            at = time.monotonic_ns()
            forger = tb.popen(tb.leaf_ns(1), [
                sys.executable, os.path.abspath(__file__), "_forge", switch_of(1),
                "%s:%d" % (tb.switch_ip, tree.DATA_PORT), "1", "2", "3"],
                stdout=subprocess.PIPE, text=True)
            outs = [p.communicate(timeout=180) for p in own]
            ended = time.monotonic_ns()
            res.update(summarise("child_hostile", own, outs, at, ended))
            outs = [p.communicate(timeout=180) for p in other]
            res["other_group"] = summarise("child_hostile", other, outs, at, ended)
            forged = forger.communicate(timeout=30)[0].strip().splitlines()
            res["forged"] = json.loads(forged[-1]) if forged else None
            res["root"] = switch_counters(tb)
    return res


def run_tree(name: str, bins: Dict[str, str]) -> dict:
    """A fault of a tree: 2 racks x 2 hosts, each rack's leaf and the root
    (tree.TreeNetwork, with the aggregation manager), uplinks at
    UPLINK_RATE; rank r JOINs its own leaf."""
    shape = LinkShape(rate=RATE, burst="256kb", latency="20ms")
    uplink = LinkShape(rate=UPLINK_RATE, burst="256kb", latency="20ms")
    tb = RackTestbed("flt", HOSTS, 2, shape=shape, uplink_shape=uplink, owner_pid=os.getpid())
    res: dict = {"fault": name}
    with tb:
        with tree.TreeNetwork(tb, bins["build"], "flt", ["--offload-controller", "off"]) as nw:
            def switch_of(r: int) -> str:
                return "%s:%d" % (tb.leaf_ip(tb.rack_of(r)), tree.DATA_PORT)
            port = 29500 + (os.getpid() % 1000) * 4
            t_launch = time.monotonic()
            procs = launch(tb, bins["cais-perf"], switch_of, port)
            fault_ns = inject_tree(name, nw, t_launch)
            outs = [p.communicate(timeout=180) for p in procs]
            res.update(summarise(name, procs, outs, fault_ns, time.monotonic_ns()))
            if name == "root_restart":
                # The job after: the manager has built the tree again.
                procs = launch(tb, bins["cais-perf"], switch_of, port + 1, NEXT_RUN_MS)
                outs = [p.communicate(timeout=180) for p in procs]
                res["next_job"] = summarise(name, procs, outs, None, time.monotonic_ns())
    return res


def inject_tree(name: str, nw: "tree.TreeNetwork", t_launch: float) -> int:
    """Switch 0 is the root, 2 the leaf of rack 1 (ranks 2, 3)."""
    time.sleep(max(0.0, t_launch + FAULT_AT_S - time.monotonic()))  # the fault's time
    at = time.monotonic_ns()
    if name == "leaf_killed":
        nw.kill_switch(2)
    elif name == "root_killed":
        nw.kill_switch(0)
    elif name == "root_restart":
        nw.kill_switch(0)
        time.sleep(1.0)  # down for 1 s: within the manager's 3 s switch lease
        nw.start_switch(0)
    elif name == "leaf_stopped":
        p = nw.switches[2]
        p.send_signal(signal.SIGSTOP)
        time.sleep(3.0)  # a child that answers nothing for 3 s
        p.send_signal(signal.SIGCONT)
    return at


def run(name: str, a, bins: Dict[str, str]) -> dict:
    if name == "child_hostile":
        return run_hostile_child(bins)
    if name in TREE_FAULTS:
        return run_tree(name, bins)
    shape_kw = {"rate": RATE, "burst": "256kb", "latency": "20ms"}
    if name == "loss_dup_reorder":
        shape_kw.update(loss="5%", duplicate="5%", delay="2ms", jitter="1ms")
    floods = name in ("join_flood", "slot_flood")
    # A flood comes from a host of its own (host 4): on a job's host it would
    # also take that host's link, which no switch can give back.
    tb = Testbed("flt", HOSTS + (1 if floods else 0), shape=LinkShape(**shape_kw),
                 owner_pid=os.getpid())
    res: dict = {"fault": name}
    with tb:
        # The offload controller off: every operation goes to the switch, so
        # the faults hit the switch path (with it on, the measured decision
        # can keep 1 MiB operations on Gloo at this rate).
        sw = Switch(tb, bins["inca-switchd"], ["--offload-controller", "off"])
        sw.start()
        flood = None
        try:
            if floods:
                kind = "joins" if name == "join_flood" else "slots"
                flood = tb.popen(tb.host_ns(HOSTS), [sys.executable, os.path.abspath(__file__),
                                                 "_flood", kind, sw.addr, str(RUN_MS / 1e3 + 8)])
                if name == "join_flood":
                    time.sleep(1.0)  # the job starts into a flood already running
            port = 29500 + (os.getpid() % 1000) * 4
            t_launch = time.monotonic()
            procs = launch(tb, bins["cais-perf"], lambda r: sw.addr, port)
            fault_ns = inject(name, tb, sw, procs, t_launch)
            outs = [p.communicate(timeout=180) for p in procs]
            ended = time.monotonic_ns()
        finally:
            if flood is not None:
                flood.terminate()
                flood.wait(10)
            counters = switch_counters(tb)
            sw.stop()
    res.update(summarise(name, procs, outs, fault_ns, ended))
    res["switch"] = counters
    return res


def inject(name: str, tb: Testbed, sw: Switch, procs: List[subprocess.Popen],
           t_launch: float) -> Optional[int]:
    """Waits until FAULT_AT_S after the launch, then does the fault; returns
    when it started (CLOCK_MONOTONIC ns), or None for faults that are there
    from the start (impaired links, floods)."""
    if name in ("none", "loss_dup_reorder", "join_flood", "slot_flood"):
        return None
    time.sleep(max(0.0, t_launch + FAULT_AT_S - time.monotonic()))  # the fault's time
    at = time.monotonic_ns()
    if name == "switch_restart":
        sw.kill()
        time.sleep(1.0)  # the switch is down for 1 s
        sw.start()
    elif name == "rank_killed":
        procs[3].send_signal(signal.SIGKILL)
    elif name == "rank_stopped":
        procs[3].send_signal(signal.SIGSTOP)
        time.sleep(3.0)  # stopped for 3 s
        procs[3].send_signal(signal.SIGCONT)
    elif name == "host_cut":
        ns = tb.host_ns(2)
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "down"],
                       check=True)
        time.sleep(2.0)  # cut off for 2 s
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up"],
                       check=True)
    return at


def switch_counters(tb: Testbed) -> dict:
    fetch = ("import urllib.request,sys;"
             "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())")
    r = subprocess.run(["ip", "netns", "exec", tb.switch_ns, sys.executable, "-c", fetch,
                        "http://%s:9411/stats.json" % tb.switch_ip], capture_output=True,
                       text=True)
    try:
        d = json.loads(r.stdout)
    except ValueError:
        return {}
    sw = d.get("switch", {})
    drops: Dict[str, int] = {}
    for g in d.get("groups", []):
        for k, v in g.get("drops", {}).items():
            drops["g%d %s" % (g["group"], k)] = v
    return {"groups_formed": sw.get("groups_formed"), "groups_forming": sw.get("groups_forming"),
            "ports_bound": sw.get("ports_bound"), "leases_expired": sw.get("leases_expired"),
            "drops": drops}


def summarise(name: str, procs, outs, fault_ns: Optional[int], ended: int) -> dict:
    codes = [p.returncode for p in procs]
    rows = []
    for o, _ in outs:
        lines = [l for l in o.splitlines() if l.startswith("{")]
        rows.append(json.loads(lines[-1])["rows"][0] if lines else None)
    res: dict = {"exit_codes": codes}
    r0 = rows[0]
    if r0 is not None:
        tl = r0["timeline_ns"]
        gaps = [b - a for a, b in zip(tl, tl[1:])]
        res["ops"] = len(tl) - 1
        res["path"] = r0["path"]
        res["host_ops"] = r0.get("host_ops", 0)
        res["wrong"] = sum(r["wrong"] for r in rows if r)
        res["median_gap_ms"] = statistics.median(gaps) / 1e6 if gaps else None
        after = [b - a for a, b in zip(tl, tl[1:]) if fault_ns is None or b > fault_ns]
        res["stall_ms"] = max(after) / 1e6 if after else None
    survivors = [k for k, c in enumerate(codes) if c != 0 and c != -signal.SIGKILL]
    if survivors:
        err = outs[survivors[0]][1].strip().splitlines()
        said = [l for l in err if l.startswith("cais-perf rank ")]  # the operation's error
        res["error"] = (said or err or ["exit %d" % codes[survivors[0]]])[-1]
        if fault_ns is not None:
            res["error_after_s"] = (ended - fault_ns) / 1e9
    return res


TREE_FAULTS = ["leaf_killed", "leaf_stopped", "root_killed", "root_restart"]
FAULTS = ["none", "switch_restart", "rank_killed", "rank_stopped", "loss_dup_reorder",
          "host_cut", "join_flood", "slot_flood"] + TREE_FAULTS + ["child_hostile"]

TITLES = {
    "none": "no fault (reference)",
    "switch_restart": "inca-switchd killed (SIGKILL), restarted 1 s later",
    "rank_killed": "rank 3 killed (SIGKILL)",
    "rank_stopped": "rank 3 stopped (SIGSTOP) for 3 s, then continued",
    "loss_dup_reorder": "5 % loss, 5 % duplication, 2 ms ± 1 ms jitter (reorders), each way",
    "host_cut": "host 2's link down for 2 s",
    "join_flood": "JOIN flood from 300 source ports of a fifth host, started 1 s before the job",
    "slot_flood": "a member of another group (a fifth host) opening slots that never complete",
    "leaf_killed": "a tree (2 racks x 2 hosts): rack 1's leaf killed (SIGKILL), not restarted",
    "leaf_stopped": "a tree: rack 1's leaf stopped (SIGSTOP) for 3 s, then continued",
    "root_killed": "a tree: the root killed (SIGKILL), not restarted",
    "root_restart": "a tree: the root killed (SIGKILL), restarted 1 s later; then a next job",
    "child_hostile": "a tree of 4 racks x 1 host, two groups sharing the root; for 3 s rack 1's "
                     "leaf address forges misshapen partials for its group and partials for the "
                     "other",
}

# Which integration test covers the same fault in CI (on loopback).
IN_CI = {
    "switch_restart": "`CollectivesTest.SwitchKilledMidRunRanksFinishOnGloo`, "
                      "`OffloadResumesWhenTheSwitchComesBack`",
    "rank_killed": "`SilentPeerTest.PeersOfAStoppedRankFailTogetherNamingIt` (the message); "
                   "`LeasesTest.ACrashedJobsGroupGivesWayToItsRerun` (the re-run)",
    "rank_stopped": "`SilentPeerTest.*`",
    "loss_dup_reorder": "`CollectivesTest.LossOfFivePercentEachWay`, "
                        "`test_testbed.py::test_exact_under_loss_and_duplication`, "
                        "`test_exact_under_jitter_that_reorders`",
    "slot_flood": "`GroupShareTest.*` (the reducer alone)",
    "join_flood": "`GroupManagerTest.AJoinFloodCannotKeepAJobOut`, "
                  "`ASourceMayHaveOnlySoManyGroupsForming`, `group_manager_fuzz` (the "
                  "membership logic alone)",
    "host_cut": "none",
    "leaf_killed": "`test_tree.py::test_ranks_finish_exact_when_a_leaf_dies_and_a_restarted_root_"
                   "gets_the_tree_back`",
    "leaf_stopped": "none",
    "root_killed": "`test_tree.py::test_a_two_level_tree_of_switch_processes_reduces_exactly_and_"
                   "falls_back_when_the_root_dies` (raw hosts)",
    "root_restart": "`test_tree.py::test_ranks_finish_exact_when_a_leaf_dies_and_a_restarted_root_"
                    "gets_the_tree_back`, `ManagerTest.ARootRestartedWithinItsLeaseWithdrawsThe"
                    "TreeAndTheRanksGetItBack`",
    "child_hostile": "`TreeAggregationTest.AChildFloodingItsGroupIsContainedToThatGroup`, "
                     "`AChildsMisshapenPartialsHandBackOnlyItsOwnGroup` (dispatcher cores)",
    "none": "",
}


def table(results: List[dict]) -> str:
    out = ["| fault | outcome | stall (median gap) | timed ops, path | lost | in CI |",
           "|---|---|---:|---|---|---|"]
    for r in results:
        if "error" in r:
            outcome = "error after %.1f s: `%s`" % (r.get("error_after_s", 0), r["error"][:160])
        elif r.get("wrong") == 0 and all(c == 0 for c in r["exit_codes"]):
            outcome = "exact"
        else:
            outcome = "exit codes %s, %s wrong" % (r["exit_codes"], r.get("wrong"))
        stall = ("%.0f ms (%.1f ms)" % (r["stall_ms"], r["median_gap_ms"])
                 if r.get("stall_ms") is not None else "—")
        ops = "%s, %s" % (r.get("ops", "—"), r.get("path", "—"))
        if r.get("host_ops"):
            ops += " (%d on the host path)" % r["host_ops"]
        if "next_job" in r:
            n = r["next_job"]
            ops += "; the next job: %s ops, %s, %s wrong" % (n.get("ops", "—"), n.get("path", "—"),
                                                            n.get("wrong", "—"))
        if "other_group" in r:
            n = r["other_group"]
            ops += "; the other group: %s ops, %s, %s wrong" % (n.get("ops", "—"),
                                                                n.get("path", "—"),
                                                                n.get("wrong", "—"))
            if n.get("host_ops"):
                ops += " (%d on the host path)" % n["host_ops"]
            forged = r.get("forged") or {}
            drops = (r.get("root") or {}).get("drops", {})
            ops += "; forged %s misshapen and %s for the other group; the root dropped %s" % (
                forged.get("misshapen", "?"), forged.get("other_group", "?"),
                ", ".join("%s %d" % kv for kv in sorted(drops.items())) or "nothing")
        if "error" in r:
            lost = "the job: every surviving rank raised"
        elif r.get("wrong") == 0:
            lost = "nothing"
        else:
            lost = "%s wrong elements" % r.get("wrong", "?")
        out.append("| %s | %s | %s | %s | %s | %s |" % (TITLES[r["fault"]], outcome, stall, ops,
                                                        lost, IN_CI[r["fault"]] or "—"))
    return "\n".join(out) + "\n"


def merged(fresh: List[dict]) -> List[dict]:
    """docs/eval/faults.json's rows with `fresh` in place of (or added to)
    those of the same fault, in FAULTS order (an --only run)."""
    with open(os.path.join(REPO, "docs", "eval", "faults.json")) as f:
        rows = {r["fault"]: r for r in json.load(f)}
    rows.update({r["fault"]: r for r in fresh})
    return [rows[k] for k in FAULTS if k in rows]


def write_docs(results: List[dict], stamp_from: Optional[str] = None) -> None:
    path = os.path.join(REPO, "docs", "reliability.md")
    text = open(path).read()
    begin, end = "<!-- faults:begin -->\n", "<!-- faults:end -->"
    i, j = text.index(begin) + len(begin), text.index(end)
    dates = sorted({r["date"] for r in results if "date" in r})
    stamp = "Regenerated by `sudo scripts/faults.py` on %s.\n\n" % (
        dates[0] if len(dates) == 1 else
        "%s to %s (each row's date in docs/eval/faults.json)" % (dates[0], dates[-1]))
    if stamp_from:  # --from-json: keep the date of the measurement
        stamp = text[i:].split("\n\n", 1)[0] + "\n\n"
    text = text[:i] + stamp + table(results) + "\n" + text[j:]
    with open(path, "w") as f:
        f.write(text)
    os.makedirs(os.path.join(REPO, "docs", "eval"), exist_ok=True)
    with open(os.path.join(REPO, "docs", "eval", "faults.json"), "w") as f:
        json.dump(results, f, indent=1)


def main() -> int:
    if sys.argv[1:2] == ["_flood"]:
        kind, switch, seconds = sys.argv[2], sys.argv[3], float(sys.argv[4])
        (flood_joins if kind == "joins" else flood_slots)(switch, seconds)
        return 0
    if sys.argv[1:2] == ["_forge"]:
        forge(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated faults: " + ", ".join(FAULTS))
    ap.add_argument("--no-write", action="store_true",
                    help="print, do not touch docs/ (with --only the rows measured replace "
                         "their own in docs/eval/faults.json and the table)")
    ap.add_argument("--from-json", action="store_true",
                    help="rewrite the table from docs/eval/faults.json, measuring nothing")
    a = ap.parse_args()
    if a.from_json:
        with open(os.path.join(REPO, "docs", "eval", "faults.json")) as f:
            write_docs(json.load(f), stamp_from=os.path.join(REPO, "docs", "reliability.md"))
        return 0
    chosen = FAULTS if not a.only else a.only.split(",")
    bad = [f for f in chosen if f not in FAULTS]
    if bad:
        print("faults.py: unknown fault(s) %s; known: %s" % (", ".join(bad), ", ".join(FAULTS)),
              file=sys.stderr)
        return 2
    try:
        net.require_root()
        bins = _bins()
    except TestbedError as e:
        print("faults.py: %s" % e, file=sys.stderr)
        return 2
    results = []
    for f in chosen:
        print("=== %s" % TITLES[f], flush=True)
        r = run(f, a, bins)
        r["date"] = time.strftime("%Y-%m-%d")
        print(json.dumps({k: v for k, v in r.items()}), flush=True)
        results.append(r)
    print(table(results))
    if not a.no_write:
        write_docs(merged(results) if a.only else results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
