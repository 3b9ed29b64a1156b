"""A tree of real inca-switchd processes on loopback: a root and two leaves,
each configured by YAML (static ports and a rule whose `uplink` is the port
toward the parent, docs/design/tree.md), four raw-socket hosts. Every
all-reduce is exact through the tree; other collectives are declined at
leaves whose rule has no rank ports (a hand-written YAML tree); a killed root makes every host's chunk fall back within the
client's 1 s switch timeout. With the aggregation manager
(inca-controller --topology), real ranks JOIN their own leaf and the tree is
built from their JOINs."""
import json
import os
import select
import socket
import struct
import subprocess
import tempfile
import time

import cais.launch as launch

HERE = os.path.dirname(os.path.abspath(__file__))

GROUP = 7
HEADER = struct.Struct(">BBHHHIIBBBB")  # docs/protocol.md, "Header layout"
ALLREDUCE, REDUCESCATTER = 0, 3
RESULT, RETRANSMIT, FALLBACK, DECLINED = 0x01, 0x02, 0x04, 0x08


def packet(op, seq, chunk, total, values, flags=0):
    payload = struct.pack("<%df" % len(values), *values)
    return HEADER.pack(op, GROUP, 0, chunk, total, seq, len(payload), 1, flags, 0, 0) + payload


def parse(data):
    op, group, _, chunk, total, seq, n, _, flags, _, block = HEADER.unpack_from(data)
    values = struct.unpack_from("<%df" % (n // 4), data, HEADER.size)
    return {"seq": seq, "chunk": chunk, "flags": flags, "block": block, "values": values}


def write_config(ports, rule):
    f = tempfile.NamedTemporaryFile("w", prefix="inca-tree-", suffix=".yaml", delete=False)
    f.write("ports:\n")
    for port, endpoint in ports:
        f.write('  - {port: %d, endpoint: "%s"}\n' % (port, endpoint))
    f.write("rules:\n  - %s\n" % json.dumps(rule))
    f.close()
    return f.name


def receive(sock, deadline):
    """The next datagram before `deadline` (monotonic), or None."""
    left = deadline - time.monotonic()
    if left <= 0 or not select.select([sock], [], [], left)[0]:
        return None
    return parse(sock.recv(65536))


def answers(hosts, want, deadline, resend=None):
    """Each host's datagrams until it has `want` of them; resend(h) every
    50 ms to a host still short (a raw host's retransmission)."""
    got = [[] for _ in hosts]
    next_resend = time.monotonic() + 0.05
    while any(len(g) < want for g in got) and time.monotonic() < deadline:
        for h, sock in enumerate(hosts):
            m = receive(sock, min(deadline, time.monotonic() + 0.01))
            if m is not None:
                got[h].append(m)
        if resend and time.monotonic() >= next_resend:
            for h, g in enumerate(got):
                if len(g) < want:
                    resend(h)
            next_resend = time.monotonic() + 0.05
    return got


def cli(sw, *verb):
    binary = os.path.join(launch.build_dir(), "bin", "cais-cli")
    p = subprocess.run([binary, "--device", sw.control_addr, "--json"] + list(verb),
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def stats(sw):
    return cli(sw, "show-stats")


def test_a_two_level_tree_of_switch_processes_reduces_exactly_and_falls_back_when_the_root_dies():
    hosts = []
    for _ in range(4):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        hosts.append(s)
    addr = {name: "127.0.0.1:%d" % launch.free_port(socket.SOCK_DGRAM)
            for name in ("root", "leaf0", "leaf1")}
    configs = [write_config([(0, addr["leaf0"]), (1, addr["leaf1"])],
                            {"group_id": GROUP, "input_ports": [0, 1], "op_type": "any"})]
    for k in range(2):
        ends = [(p, "127.0.0.1:%d" % hosts[2 * k + p].getsockname()[1]) for p in range(2)]
        configs.append(write_config(ends + [(100, addr["root"])],
                                    {"group_id": GROUP, "input_ports": [0, 1], "uplink": 100,
                                     "op_type": "any"}))
    switches = []
    try:
        # The root decides: the leaves wait longer than it does.
        for name, cfg, timeout_ms in (("root", configs[0], 500), ("leaf0", configs[1], 700),
                                      ("leaf1", configs[2], 700)):
            switches.append(launch.Switch(extra=["--config", cfg], timeout_ms=timeout_ms,
                                          data_port=int(addr[name].rsplit(":", 1)[1])))
        root, leaf0, leaf1 = switches
        leaf_of = [leaf0, leaf0, leaf1, leaf1]

        def send(h, data):
            host, port = leaf_of[h].data_addr.rsplit(":", 1)
            hosts[h].sendto(data, (host, int(port)))

        # Two all-reduces of three chunks: every host gets every chunk's sum.
        for seq in (1, 2):
            values = [[(h + 1) * 0.5 + c + seq * 10 + i for i in range(100)]
                      for h in range(4) for c in range(3)]

            def contribute(h, flags=0):
                for c in range(3):
                    send(h, packet(ALLREDUCE, seq, c, 3, values[h * 3 + c], flags))

            for h in range(4):
                contribute(h)
            got = answers(hosts, 3, time.monotonic() + 10,
                          resend=lambda h: contribute(h, RETRANSMIT))
            for h in range(4):
                chunks = {m["chunk"]: m for m in got[h] if m["seq"] == seq}
                assert sorted(chunks) == [0, 1, 2], got[h]
                for c, m in chunks.items():
                    assert m["flags"] == RESULT, m
                    want = [sum(values[q * 3 + c][i] for q in range(4)) for i in range(100)]
                    assert list(m["values"]) == [struct.unpack("<f", struct.pack("<f", w))[0]
                                                 for w in want]
        for leaf in (leaf0, leaf1):
            s = stats(leaf)
            assert s["uplink_partials"] >= 6 and s["parent_results"] >= 6, s
            assert s["conserved"] is True, s
        r = stats(root)
        assert r["completed_chunks"] >= 6 and r["uplink_partials"] == 0, r
        # Each switch reports its place in the tree.
        t = cli(leaf1, "show-tree", "--group-id", str(GROUP))
        assert t["role"] == "child" and t["uplink_port"] == 100 and t["parent"] == addr["root"], t
        assert [m["endpoint"] for m in t["members"]] == [
            "127.0.0.1:%d" % hosts[h].getsockname()[1] for h in (2, 3)], t
        assert t["parent_results"] == 6 and t["slot_holding_p99_us"] > 0, t
        t = cli(root, "show-tree", "--group-id", str(GROUP))
        assert t["role"] == "root" and t["parent"] is None, t
        assert [m["endpoint"] for m in t["members"]] == [addr["leaf0"], addr["leaf1"]], t

        # A reduce-scatter is declined at the leaf (reason 6, "tree").
        send(0, packet(REDUCESCATTER, 3, 0, 1, [1.0]))
        m = receive(hosts[0], time.monotonic() + 5)
        assert m and m["flags"] == RESULT | FALLBACK | DECLINED and m["block"] == 6, m

        # The root dies: the leaves hand every chunk back (their 700 ms
        # timeout) before the client's 1 s switch timeout.
        root.stop()
        start = time.monotonic()
        for h in range(4):
            send(h, packet(ALLREDUCE, 4, 0, 1, [float(h)]))
        got = answers(hosts, 1, start + 5)
        for h in range(4):
            assert got[h] and got[h][0]["flags"] == RESULT | FALLBACK, got[h]
        assert time.monotonic() - start < 1.0
    finally:
        for sw in switches:
            sw.stop()
        for cfg in configs:
            os.unlink(cfg)
        for s in hosts:
            s.close()


class ManagedTree:
    """A spine and `racks` leaves (inca-switchd on loopback) and inca-controller
    --topology over them; rack k's host is 127.0.1.(k+1). The root decides:
    the leaves wait longer than it does."""

    def __init__(self, racks):
        self.switches, self.manager, self.topo = [], None, None
        try:
            self.switches.append(launch.Switch(timeout_ms=1000))
            for _ in range(racks):
                self.switches.append(launch.Switch(timeout_ms=1500))
            self.topo = tempfile.NamedTemporaryFile("w", prefix="inca-topology-", suffix=".yaml",
                                                    delete=False)
            self.topo.write("switches:\n")
            for k, sw in enumerate(self.switches):
                name, parent = ("spine", "") if k == 0 else ("leaf%d" % (k - 1), ", parent: spine")
                self.topo.write('  - {name: %s, address: "%s", control: "%s"%s}\n'
                                % (name, sw.data_addr, sw.control_addr, parent))
            self.topo.write("hosts:\n")
            for k in range(racks):
                self.topo.write("  - {at: leaf%d, addresses: [%s]}\n" % (k, self.host(k)))
            self.topo.close()
            binary = os.path.join(launch.build_dir(), "bin", "inca-controller")
            self.manager = subprocess.Popen([binary, "--topology", self.topo.name, "--period-ms",
                                             "50"], stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True)
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def host(rack):
        return "127.0.1.%d" % (rack + 1)

    @property
    def root(self):
        return self.switches[0]

    def leaf(self, rack):
        return self.switches[1 + rack]

    def restart(self, k):
        """Switch k (0: the root, k: leaf k-1) killed (SIGKILL) and started
        again on the same data and control ports: a crash and a restart."""
        old = self.switches[k]
        old.proc.kill()
        old.proc.wait()
        old.stop()
        self.switches[k] = launch.Switch(timeout_ms=1000 if k == 0 else 1500,
                                         data_port=int(old.data_addr.rsplit(":", 1)[1]),
                                         control_port=int(old.control_addr.rsplit(":", 1)[1]))

    def perf_ranks(self, n, duration_ms, size="4M"):
        """n cais-perf ranks, rank r on leaf r // (n / racks), f32
        all-reduces of `size` checked exactly for about `duration_ms` (the
        count is set from one warm-up operation's time)."""
        per = n // (len(self.switches) - 1)
        perf = os.path.join(launch.build_dir(), "bin", "cais-perf")
        master_port = launch.free_port()
        return [subprocess.Popen(
            [perf, "--op", "allreduce", "--rank", str(r), "--world-size", str(n), "--master-addr",
             "127.0.0.1", "--master-port", str(master_port), "--bind", self.host(r // per),
             "--switch", self.leaf(r // per).data_addr, "-b", size, "-e", size, "--iters", "1",
             "--warmup", "1", "--duration-ms", str(duration_ms), "--json", "--timeout-s", "120"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(n)]

    def finish(self):
        """Stops the manager; its JSON lines (trees, then counters) and its log."""
        self.manager.terminate()
        stdout, stderr = self.manager.communicate(timeout=30)
        assert self.manager.returncode == 0, stderr
        return [json.loads(x) for x in stdout.splitlines()], stderr

    def stop(self, procs=()):
        """Kills `procs` (ranks still running), then the manager and switches."""
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if self.manager is not None and self.manager.poll() is None:
            self.manager.kill()
            self.manager.wait()
        for sw in self.switches:
            sw.stop()
        if self.topo is not None:
            os.unlink(self.topo.name)


def test_the_aggregation_manager_builds_the_tree_from_the_ranks_joins():
    """Four ranks (`import cais`), two on each leaf, JOIN their leaf;
    inca-controller --topology installs the tree; every collective
    (all-reduce, reduce-scatter, all-gather, broadcast) goes up it exact;
    the manager reports it."""
    tree = ManagedTree(2)
    try:
        def rank_env(r):
            return {"INCA_SWITCH": tree.leaf(r // 2).data_addr,
                    "INCA_BIND_IP": tree.host(r // 2)}

        out = launch.run_ranks([os.path.join(HERE, "rank_worker.py"), "tree"], 4,
                               rank_env=rank_env, timeout_s=120)
        for r in out:
            # Every operation through the tree, none on the host path.
            assert r["stats"]["ops_switch"] >= 7 and r["stats"]["ops_host"] == 0, r
        for k in range(2):
            s = stats(tree.leaf(k))
            assert s["uplink_partials"] > 0 and s["parent_results"] > 0, s
        # Rank 0's REPORTs (it speaks for the group) went up from its leaf,
        # for the root's offload decisions.
        assert stats(tree.leaf(0))["mgmt_reports_forwarded"] > 0
        r = stats(tree.root)
        assert r["completed_chunks"] > 0 and r["uplink_partials"] == 0, r
        assert r["mgmt_reports"] > 0 and r["mgmt_reports_forwarded"] == 0, r
        lines, log = tree.finish()
        counters = lines[-1]["manager"]
        assert counters["trees_installed"] >= 1 and counters["install_failures"] == 0, lines
        assert "event=tree_installed group=255" in log, log
        assert "switches=spine,leaf0,leaf1" in log, log
    finally:
        tree.stop()


def test_128_ranks_across_four_leaves_reduce_exactly_on_the_switch_path():
    """A group twice the size one switch holds: 128 cais-perf ranks, 32
    behind each of 4 leaves, one tree; every result exact and every
    operation on the switch path."""
    racks, per = 4, 32
    tree = ManagedTree(racks)
    procs = []
    try:
        perf = os.path.join(launch.build_dir(), "bin", "cais-perf")
        master_port = launch.free_port()
        env = dict(os.environ, INCA_JOIN_TIMEOUT_MS="60000")  # 128 processes start on 2 cores
        for r in range(racks * per):
            k = r // per
            procs.append(subprocess.Popen(
                [perf, "--op", "allreduce", "--rank", str(r), "--world-size", str(racks * per),
                 "--master-addr", "127.0.0.1", "--master-port", str(master_port),
                 "--bind", tree.host(k), "--switch", tree.leaf(k).data_addr, "-b", "64K",
                 "-e", "64K", "--iters", "3", "--warmup", "1", "--json", "--timeout-s", "240"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
        outs = [p.communicate(timeout=300) for p in procs]
        for r, (p, (_, stderr)) in enumerate(zip(procs, outs)):
            assert p.returncode == 0, (r, stderr[-2000:])
        # Rank 0 reports the row: wrong elements summed over every rank,
        # host-path operations the most any rank ran.
        row = json.loads(outs[0][0].splitlines()[-1])["rows"][0]
        assert row["wrong"] == 0 and row["path"] == "switch" and row["host_ops"] == 0, row
        for k in range(racks):
            s = stats(tree.leaf(k))
            assert s["uplink_partials"] >= 4 * 8 and s["conserved"] is True, s
        lines, log = tree.finish()
        assert "world_size=128 depth=2 switches=spine,leaf0,leaf1,leaf2,leaf3" in log, log
    finally:
        tree.stop(procs)


def finished(procs):
    """Every rank's exit 0; rank 0's row (wrong elements summed over ranks)."""
    outs = [p.communicate(timeout=180) for p in procs]
    for r, (p, (_, stderr)) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, (r, stderr[-2000:])
    return json.loads(outs[0][0].splitlines()[-1])["rows"][0], [e for _, e in outs]


def wait_until(what, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, "not within %d s" % timeout_s
        time.sleep(0.02)  # polling a switch's counters, bounded by the deadline


def test_ranks_finish_exact_when_a_leaf_dies_and_a_restarted_root_gets_the_tree_back():
    """Four cais-perf ranks on two leaves. The root crashes and restarts
    while the tree carries their partials: the manager withdraws the tree
    (the root answers without it) and the ranks finish exact. The next job
    reduces through the restarted root, then loses a leaf for good: every
    rank finishes exact on the host path."""
    tree = ManagedTree(2)
    procs = []
    try:
        procs = tree.perf_ranks(4, 3000)
        wait_until(lambda: stats(tree.leaf(1))["uplink_partials"] > 0)
        tree.restart(0)
        row, _ = finished(procs)
        assert row["wrong"] == 0, row

        procs = tree.perf_ranks(4, 3000)
        wait_until(lambda: stats(tree.root)["completed_chunks"] > 0)  # the tree is back
        tree.leaf(1).proc.kill()
        row, _ = finished(procs)
        assert row["wrong"] == 0 and row["host_ops"] > 0, row
        lines, log = tree.finish()
        assert "reason=\"switch spine no longer holds the group\"" in log, log
        assert lines[-1]["manager"]["trees_installed"] >= 2, lines
    finally:
        tree.stop(procs)
