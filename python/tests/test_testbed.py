"""The multi-host testbed (scripts/testbed.py): one rank per host namespace
through inca-switchd in the switch namespace, over shaped links. Needs root
(CI runs as root). About 30 s of CI time."""
import json
import os
import subprocess
import sys

import pytest

import cais.launch as launch
from conftest import HERE

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
from inca_testbed import cli, net, perf, reflect

WORKER = os.path.join(HERE, "rank_worker.py")


def instance_name(tag: str) -> str:
    # Unique per test process: parallel runs never share namespaces.
    return "%s%d" % (tag, os.getpid() % 1000000)


def run_job(tb, hosts, env=None, on_switch=None):
    """The testbed worker on every host, through a switch on the instance's
    data address (IPv6 on an ipv6 instance; the store and Gloo stay on IPv4);
    on_switch(sw), if given, runs after the ranks, while the switch still does."""
    with launch.Switch(host=tb.data_ip(), wrap=["ip", "netns", "exec", tb.switch_ns]) as sw:
        e = {"INCA_SWITCH": sw.data_addr, "MASTER_ADDR": tb.host_ip(0),
             "GLOO_SOCKET_IFNAME": "eth0"}
        e.update(env or {})
        res = launch.run_ranks([WORKER, "testbed"], hosts, env=e, timeout_s=240,
                               wrap=lambda r: ["ip", "netns", "exec", tb.host_ns(r)],
                               rank_env=lambda r: {"INCA_BIND_IP": tb.data_ip(r)})
        if on_switch:
            on_switch(sw)
        return res


def leftovers(name):
    """Namespaces, records and logs of instance `name` still there."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    files = os.listdir(net.STATE_DIR) if os.path.isdir(net.STATE_DIR) else []
    return ([l for l in ns.splitlines() if l.startswith("inca-%s-" % name)] +
            [f for f in files if f.startswith(name + ".") or f.startswith(name + "-")])


def test_exact_on_both_backends_over_shaped_links_and_nothing_left_behind():
    name = instance_name("a")
    shape = net.LinkShape(rate="200mbit")
    with net.Testbed(name, 3, shape=shape, owner_pid=os.getpid()) as tb:
        res = run_job(tb, 3)
        stats = tb.link_stats()
        # The rate step's queue sampler reads every shaped port's tbf, in bytes.
        backlogs = perf.tbf_backlogs(tb.switch_ns)
        host_backlog = perf.tbf_backlogs(tb.host_ns(0))
        # The same through one tc process that stays up, read several times,
        # and by a tc run per sample once that process is gone.
        sampler = perf.TbfSampler(tb.switch_ns)
        batch_reads = [sampler.backlogs() for _ in range(3)]
        batch_pid = sampler.proc.pid
        sampler.close()
        after_close = sampler.backlogs()
    assert batch_pid > 0
    assert [sorted(b) for b in batch_reads] == [["p0", "p1", "p2"]] * 3, batch_reads
    assert sorted(after_close) == ["p0", "p1", "p2"], after_close
    assert sorted(backlogs) == ["p0", "p1", "p2"], backlogs
    assert list(host_backlog) == ["eth0"], host_backlog
    assert all(isinstance(v, int) and v >= 0 for v in list(backlogs.values()) +
               list(host_backlog.values()))
    assert all(r["switch"]["stats"]["ops_switch"] >= 4 for r in res)
    assert all(r["host"]["stats"]["ops_host"] >= 4 for r in res)
    # The switch is in another namespace, across shaped links: the network's delay target.
    assert all(r["switch"]["stats"]["switch_on_host"] is False for r in res)
    # Nor does the progress thread yield to it (SCHED_BATCH is for a switch on this host).
    assert all(r["switch"]["stats"]["progress_batch"] is False for r in res)
    # The job's bytes crossed every shaped link, both ways (3 x 2 MiB each way at least).
    for s in stats:
        assert s["bytes"] > 6 * (1 << 20), s
    assert leftovers(name) == []


def test_ipv6_end_to_end_through_the_switch_and_its_control_api():
    # The IPv6 benchmarking range inside the namespaces: the ranks bind their
    # 2001:2:0:S::(10+i), the switch listens on 2001:2:0:S::1 for data and for
    # its control API, and cais-cli reads the group's counters over IPv6.
    name = instance_name("v")
    seen = {}

    def control(sw):
        assert sw.control_addr.startswith("[2001:2:0:"), sw.control_addr
        cli = os.path.join(launch.build_dir(), "bin", "cais-cli")
        p = subprocess.run(["ip", "netns", "exec", tb.switch_ns, cli, "--device", sw.control_addr,
                            "--json", "show-stats"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        seen["stats"] = json.loads(p.stdout)

    with net.Testbed(name, 3, shape=net.LinkShape(rate="200mbit"), owner_pid=os.getpid(),
                         ipv6=True) as tb:
        assert tb.data_ip() == tb.switch_ip6 and tb.data_ip(1) == tb.host_ip6(1)
        # 8,932 B: an IPv6 datagram's CAIS payload in one 9000-byte MTU.
        res = run_job(tb, 3, {"CHUNK_SIZE": str(9000 - perf.IP6_UDP_CAIS)},
                      on_switch=control)
    assert all(r["switch"]["stats"]["ops_switch"] >= 4 for r in res)
    assert all(r["switch"]["stats"]["ops_host"] == 0 for r in res)
    # The switch reduced the job's chunks: 3 all-reduces of 2 MiB in
    # 8,932-byte chunks (and a small reduce-scatter), read over IPv6.
    assert seen["stats"]["completed_chunks"] >= 3 * -(-(2 << 20) // 8932), seen
    assert seen["stats"]["conserved"] is True, seen
    assert leftovers(name) == []


@pytest.mark.parametrize("competitive", [False, True])
def test_exact_under_loss_and_duplication(competitive):
    # Both transport modes: in competitive mode a loss also halves the window.
    name = instance_name("b")
    shape = net.LinkShape(rate="200mbit", loss="1%", duplicate="1%")
    with net.Testbed(name, 3, shape=shape, owner_pid=os.getpid()) as tb:
        probe = tb.measure(1, "down", count=2000)
        res = run_job(tb, 3, {"COUNT": str(1 << 18), "COMPETITIVE": "1" if competitive else "0"})
    # The links did what was asked (2000 samples: 1 % +- 0.22 %, 6 sigma bounds) ...
    assert 0.001 < probe["lost"] < 0.025, probe
    assert 0.001 < probe["duplicated"] < 0.025, probe
    # ... and the job recovered: retransmissions or result requests, exact results
    # (each rank checks every element), no operation left on the host path.
    again = sum(r["switch"]["stats"]["chunks_retransmitted"] + r["switch"]["stats"]["result_requests"]
                for r in res)
    assert again > 0
    assert all(r["switch"]["stats"]["ops_host"] == 0 for r in res)
    assert leftovers(name) == []


def test_exact_under_jitter_that_reorders():
    # 2 ms +- 1 ms each way: netem's where the kernel has it, else
    # inca-linkdelay's (the same semantics; this CI kernel has no sch_netem).
    name = instance_name("j")
    shape = net.LinkShape(rate="200mbit", delay="2ms", jitter="1ms")
    with net.Testbed(name, 3, shape=shape, owner_pid=os.getpid()) as tb:
        up, down = tb.measure(0, "up"), tb.measure(2, "down")
        res = run_job(tb, 3, {"COUNT": str(1 << 18)})
    # The links reorder (datagrams 62 us apart on average, jitter 2 ms wide) ...
    for m in (up, down):
        assert m["reordered"] > 0.2 and m["lost"] == 0 and m["duplicated"] == 0, m
    # ... and every rank's results were exact (checked in the worker), with
    # every operation through the switch.
    assert all(r["switch"]["stats"]["ops_switch"] >= 4 for r in res)
    assert all(r["switch"]["stats"]["ops_host"] == 0 for r in res)
    if tb.netem is False:  # each delay line accounted for every frame it took
        assert sorted(tb.linkdelay_counters) == [0, 1, 2]
        for c in tb.linkdelay_counters.values():
            for d in ("up", "down"):
                assert c[d]["frames_in"] == c[d]["frames_out"] + c[d]["dropped_limit"], c
                assert c[d]["overtaken"] > 0, c
    assert leftovers(name) == []


def test_loss_is_measured_as_configured():
    name = instance_name("m")
    with net.Testbed(name, 1, shape=net.LinkShape(loss="5%"), owner_pid=os.getpid()) as tb:
        up, down = tb.measure(0, "up"), tb.measure(0, "down")
    for m in (up, down):  # 2000 samples: 5 % +- 0.49 %
        assert 0.02 < m["lost"] < 0.08 and m["duplicated"] == 0 and m["reordered"] == 0, m


def test_reaper_removes_an_instance_whose_owner_died():
    name = instance_name("c")
    owner = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    tb = net.Testbed(name, 2, owner_pid=owner.pid).up()
    assert len(leftovers(name)) == 4  # two hosts, the switch, the state file
    assert name not in net.reap()  # the owner lives
    owner.stdin.close()
    owner.wait(10)
    assert name in net.reap()
    assert leftovers(name) == []
    tb.down()  # idempotent


def test_sigterm_mid_run_tears_everything_down():
    # kill / timeout(1) while ranks run: the same clean-up as Ctrl-C, not a
    # testbed left for the next reap.
    name = instance_name("k")
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "testbed.py"), "perf",
                          "--name", name, "--hosts", "2", "--rate", "200mbit", "-b", "1M",
                          "-e", "1M", "--iters", "100000", "--warmup", "0"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, INCA_BUILD_DIR=launch.build_dir()))
    try:
        # Until a rank runs in host 1's namespace (bounded: the set-up takes
        # seconds); between looks, wait on perf itself, which must not end.
        running = False
        for _ in range(600):
            out = subprocess.run(["ip", "netns", "pids", "inca-%s-h1" % name],
                                 capture_output=True, text=True).stdout
            if out.split():
                running = True
                break
            try:
                p.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                continue
            pytest.fail("perf ended before its ranks ran: " + p.stderr.read())
        assert running
        p.terminate()
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "interrupted" in err, err
    assert leftovers(name) == []


def test_bad_arguments_are_one_line_errors():
    assert_one_line_errors([sys.executable, os.path.join(ROOT, "scripts", "testbed.py")], [
        [["up", "--name", "Bad_Name"], "lowercase"],
        [["up", "--name", "x", "--rate", "fast"], "rate"],
        [["up", "--name", "x", "--jitter", "1ms"], "jitter needs a delay"],
        [["up", "--name", "x", "--loss", "150%"], "between 0 and 100%"],
        [["exec", "--name", "nosuch", "--", "true"], "is testbed nosuch up"],
        [["perf", "--name", "x", "--switches", "9"], "between 1 and 8"]])


def assert_one_line_errors(cmd, cases):
    """Each (argv, words): `cmd + argv` exits 2 with one line on stderr
    holding `words`."""
    for argv, words in cases:
        p = subprocess.run(cmd + argv, capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, (argv, p.stderr)
        assert words in p.stderr and p.stderr.count("\n") == 1, (argv, p.stderr)


def build_dir():
    return os.environ.get("INCA_BUILD_DIR", os.path.join(ROOT, "build", "release"))


def test_af_xdp_reflector_returns_every_datagram_for_its_port_and_counts_the_rest():
    # udp-forwarder --io xdp on the switch's port p0 (src/switchd/xsk_reflector.h),
    # driven from host 0 through the real veth, as `testbed.py reflect` runs it.
    name = instance_name("x")
    build = build_dir()
    with net.Testbed(name, 1, mtu=1500, owner_pid=os.getpid()) as tb:
        p = reflect.start(tb, build, "xdp", 9420)
        try:
            bench = subprocess.run(
                ["ip", "netns", "exec", tb.host_ns(0), os.path.join(build, "bin", "switchd-bench"),
                 "--target", "%s:9420" % tb.switch_ip, "--target-pid", str(p.pid), "--payload",
                 "1452", "--packets", "3000", "--max-seconds", "20", "--io", "mmsg"],
                capture_output=True, text=True, timeout=60)
            # Not for its port: dropped by the reflector (the kernel never sees it).
            subprocess.run(["ip", "netns", "exec", tb.host_ns(0), sys.executable, "-c",
                            "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                            "for _ in range(5): s.sendto(b'x' * 64, ('%s', 9421))" % tb.switch_ip],
                           check=True, timeout=30)
        finally:
            counters = reflect.stop(p)
    assert bench.returncode == 0, bench.stderr
    rows = [m for m in map(reflect.ROW_RE.match, bench.stdout.splitlines()) if m]
    assert len(rows) == 1 and float(rows[0].group(1)) > 0, bench.stdout
    assert counters["datagrams_tx"] >= 3000, counters
    assert counters["dropped"] >= 5, counters
    assert counters["datagrams_rx"] == counters["datagrams_tx"] + counters["dropped"], counters
    assert counters["send_errors"] == 0, counters
    assert not leftovers(name)


def test_udp_forwarder_xdp_bad_arguments_are_one_line_errors():
    binary = os.path.join(build_dir(), "bin", "udp-forwarder")
    assert_one_line_errors([binary], [
        [["--io", "xdp"], "--interface '' is not a device here"],
        [["--io", "xdp", "--interface", "nosuch0"], "'nosuch0' is not a device"],
        [["--io", "xdp", "--interface", "lo", "--forward", "127.0.0.1:9"],
         "reflects only"],
        [["--io", "xdp", "--interface", "lo", "--xdp-mode", "fast"], "--xdp-mode"],
        [["--io", "xdp", "--interface", "lo", "--listen", "nohost"], "nohost"]])


def test_linkdelay_bad_arguments_are_one_line_errors():
    binary = os.path.join(os.environ.get("INCA_BUILD_DIR", os.path.join(ROOT, "build", "release")),
                          "bin", "inca-linkdelay")
    assert_one_line_errors([binary], [
        [[], "--link is required"],
        [["--link", "p0"], "is not HOST_PORT,SWITCH_PORT"],
        [["--link", "p0,q0", "--up-delay", "2 parsecs"], "not a duration"],
        [["--link", "lo,lo"], "two different interfaces"],
        [["--link", "nosuch0,lo"], "interface nosuch0"],
        [["--link", "lo,nosuch1", "--up-reorder", "0.5"], "reorder needs a delay"],
        [["--link", "lo,nosuch1", "--down-reorder", "2"], "--down-reorder"]])


def test_perf_launcher_runs_one_rank_per_host_on_both_backends():
    # scripts/testbed.py perf: cais-perf as one rank per host namespace
    # (RANK/WORLD_SIZE/MASTER_ADDR/INCA_SWITCH/INCA_BIND_IP), both backends,
    # exact results; the bounds it prints are checked in test_wire_bounds
    # (at these sizes, near the 256 KB tbf burst, a bound does not apply).
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "testbed.py"), "perf",
                        "--name", instance_name("p"), "--hosts", "2", "--rate", "200mbit",
                        "-b", "256K", "-e", "1M", "--iters", "2", "--warmup", "1",
                        "--switchd-arg=--offload-controller=off",
                        "--perf-arg=--window-trace=300"],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, INCA_BUILD_DIR=launch.build_dir()))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert leftovers(instance_name("p")) == []
    import json
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert [r["bytes"] for r in res["rows"]] == [262144, 1048576]
    for r in res["rows"]:
        assert r["wrong"] == 0 and r["path"] == "switch" and r["host_ops"] == 0, {
            k: v for k, v in r.items() if k != "window_trace"}
        assert r["gloo_us"] > 0 and r["switch_us"] > 0
        assert r["chunks_sent"] > 0
    # The baseline is plain Gloo, without inca's per-operation description exchange.
    assert "backend gloo" in p.stdout and "plain Gloo (agreement check off)" in p.stdout
    # Rank 0's window samples (--window-trace 300): the last 300 at most, in
    # time order, windows within [2, 64] chunks, round trips measured.
    first, last = res["rows"][0]["window_trace"], res["rows"][-1]["window_trace"]
    assert 0 < len(first) <= len(last) <= 300
    assert [s[0] for s in last] == sorted(s[0] for s in last)
    assert all(2 <= w <= 64 and rtt > 0 for _, w, rtt in last), last[:5]


def test_perf_counts_host_path_operations_once_not_per_rank():
    # With --offload false every timed operation (2) and the check run on the
    # host path: the row says 3, the most any rank saw, not the sum over the
    # 2 ranks (the one-rank mode reduces it with max), and prints the count.
    name = instance_name("h")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "testbed.py"), "perf",
                        "--name", name, "--hosts", "2", "--rate", "200mbit", "-b", "256K",
                        "-e", "256K", "--iters", "2", "--warmup", "1", "--backends", "switch",
                        "--perf-arg=--offload=false"],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, INCA_BUILD_DIR=launch.build_dir()))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    row = json.loads(p.stdout.strip().splitlines()[-1])["rows"][0]
    assert row["wrong"] == 0 and row["path"] == "host/mixed" and row["host_ops"] == 3, row
    assert row["why"] == "off", row  # --offload false: not on the switch
    assert "host/mixed (3 on the host path: off)" in p.stdout
    assert leftovers(name) == []


def test_perf_stripes_over_two_switches():
    # perf --switches 2: two inca-switchd processes in the switch namespace,
    # every operation striped over both (INCA_SWITCH=a,b): exact, on the
    # switch path, and each switch completed its half of the chunks.
    name = instance_name("z")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "testbed.py"), "perf",
                        "--name", name, "--hosts", "3", "--rate", "200mbit", "-b", "1M", "-e", "1M",
                        "--iters", "2", "--warmup", "1", "--backends", "switch", "--switches", "2",
                        "--switchd-arg=--offload-controller=off"],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, INCA_BUILD_DIR=launch.build_dir()))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    row = res["rows"][0]
    assert row["wrong"] == 0 and row["path"] == "switch", row
    # 1 MiB in 8,952-byte chunks: 118 per operation, 59 on each switch, for
    # at least 3 operations (one a warm-up; cais-perf adds its own, and an
    # operation of one chunk goes to the first switch only).
    a, b = res["switch_completed_chunks"]
    assert min(a, b) >= 3 * 59 and abs(a - b) < 59, (a, b)
    assert "# chunks each switch completed" in p.stdout
    assert leftovers(name) == []


def test_wire_bounds():
    # 16 MiB over 4 hosts at 1 Gbit/s, MTU 9000: the ring moves 1.5 x 16 MiB
    # in 8948-byte TCP segments (+66 B), the switch 16 MiB in 8952-byte
    # datagrams (+62 B).
    b = perf.wire_bounds(16 << 20, 4, 1e9, 9000, 8952)
    ring = 1.5 * (16 << 20)
    assert b["ring_s"] == pytest.approx((ring + -(-ring // 8948) * 66) * 8 / 1e9)
    assert b["switch_s"] == pytest.approx(((16 << 20) + -(-(16 << 20) // 8952) * 62) * 8 / 1e9)
    assert 1.49 < b["ring_s"] / b["switch_s"] < 1.51
    # Over IPv6 a datagram has 20 more bytes of headers, and the default
    # chunk is what one MTU carries.
    b6 = perf.wire_bounds(16 << 20, 4, 1e9, 9000, 8932, ipv6=True)
    assert b6["switch_s"] == pytest.approx(((16 << 20) + -(-(16 << 20) // 8932) * 82) * 8 / 1e9)
    assert cli.perf_options([]).chunk_size == 8952
    assert cli.perf_options(["--ipv6"]).chunk_size == 8932
    assert cli.perf_options(["--mtu", "1500", "--ipv6"]).chunk_size == 1432
    assert cli.perf_options(["--chunk-size", "4096", "--ipv6"]).chunk_size == 4096
    assert perf.wire_bounds(1 << 20, 8, 5e8, 9000, 8952)["ring_s"] / \
        perf.wire_bounds(1 << 20, 8, 5e8, 9000, 8952)["switch_s"] == pytest.approx(1.75, rel=0.01)


def test_two_jobs_share_the_testbed():
    # Two 2-rank inca jobs on their own switch groups, one rank of each per host,
    # at once: both exact (cais-perf checks) and both through the switch.
    # Two groups share the switch's pending-chunk limit (128 switch-wide by
    # default; per-group shares are issue 18's): give them room. The embedded
    # offload controller sometimes declines an operation of two jobs at once
    # (its queue-delay model, issue 15's item 4); this test is about sharing.
    a = cli.perf_options(["--name", instance_name("s"), "--hosts", "2", "--rate", "200mbit",
                              "-b", "1M", "-e", "1M", "--iters", "6", "--warmup", "1",
                              "--switchd-arg=--max-pending-chunks=1024",
                              "--switchd-arg=--offload-controller=off"])
    import io
    res = perf.share(a, "switch", out=io.StringIO())
    row = res["rows"][0]
    assert row["paths"] == ["switch", "switch"], row
    # Both timelines came back, in one clock: the jobs ran at the same time.
    assert row["overlap_s"] > 0, row
    assert sum(row["ops_in_overlap"]) >= 1, row


def test_overlap_counts_only_operations_inside_the_common_time():
    ms = 1_000_000
    a = [0, 10 * ms, 20 * ms, 30 * ms, 40 * ms]       # 4 ops of 10 ms
    b = [15 * ms, 20 * ms, 25 * ms, 30 * ms, 35 * ms, 60 * ms]
    ov = perf.overlap(a, b)
    assert ov["overlap_s"] == pytest.approx(0.025)   # 15 .. 40 ms
    assert ov["ops_a"] == 2 and ov["mean_a_us"] == pytest.approx(10_000)   # 20-30, 30-40
    assert ov["ops_b"] == 4 and ov["mean_b_us"] == pytest.approx(5_000)    # 15 .. 35
    assert perf.overlap(a, [50 * ms, 60 * ms])["overlap_s"] == 0
    assert perf.overlap([], b)["mean_a_us"] is None


def test_rate_step_summary_reads_both_directions_in_bdp_at_the_new_rate():
    ms = 1_000_000
    step = 100 * ms
    # 250 Mbit/s after the step, 1 ms each way: the round trip is 2 ms plus a
    # chunk serialised up and down, and 1 BDP is that much of the new rate.
    res = {"slow_rate": "250mbit", "delay": "1ms", "stepped_ns": step,
           "timeline_ns": [0, 50 * ms, 100 * ms, 140 * ms, 180 * ms, 220 * ms],
           "window_trace": [(step - 2 * ms, 20.0, 1500), (step - ms, 22.0, 1500),
                            (step + ms, 12.0, 2500), (step + 2 * ms, 6.0, 2500),
                            (step + 3 * ms, 6.0, 2500)],
           "samples": [(step - ms, 999_999, 999_999)] +  # before the step: not counted
                      [(step + k * 20 * ms, up, down)
                       for k, (up, down) in enumerate([(0, 9000), (18000, 0), (0, 36000),
                                                       (9000, 18000)])]}
    out = perf.step_summary(res, 8952)
    rtt = 2 * (8952 + 104) * 8 / 250e6 + 2e-3
    assert out["rtt_ms"] == pytest.approx(rtt * 1e3)
    bdp = 250e6 / 8 * rtt
    assert out["queue_up_max_bdp"] == pytest.approx(18000 / bdp)
    assert out["queue_down_max_bdp"] == pytest.approx(36000 / bdp)
    assert out["queue_down_median_bdp"] == pytest.approx(18000 / bdp)
    # 20 round trips (51.6 ms) after the step only the sample at 60 ms counts.
    assert out["queue_up_settled_max_bdp"] == pytest.approx(9000 / bdp)
    assert out["queue_down_settled_max_bdp"] == pytest.approx(18000 / bdp)
    assert out["window_before"] == 22.0 and out["window_after_median"] == 6.0
    assert out["window_settle_ms"] == pytest.approx(2.0)   # within 25 % of 6 from step + 2 ms
    assert out["op_ms"] == pytest.approx(40.0)
    assert out["sample_period_ms"] == pytest.approx(20.0)  # gaps of 1, 20, 20, 20 ms
    with pytest.raises(net.TestbedError, match="not a time"):
        perf.step_summary(dict(res, delay="1 fortnight"), 8952)


def test_tp_benchmark_runs_one_rank_per_host_namespace():
    # python/examples/tp/benchmark.py --testbed: the write-up's smoke test and
    # the TP block on both backends, every rank in its own host namespace,
    # the switch in the switch namespace; nothing left behind.
    tp = os.path.join(ROOT, "python", "examples", "tp", "benchmark.py")
    before = set(subprocess.run(["ip", "netns", "list"], capture_output=True,
                                text=True).stdout.split())
    out = subprocess.run([launch.PYTHON, tp, "--testbed", "2", "--rate", "200mbit",
                          "--steps", "3", "--warmup", "1", "--smoke-ops", "20", "--hidden", "32",
                          "--ffn", "64", "--seq", "8", "--batch", "2"],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 mismatches" in out.stdout and "PASS" in out.stdout, out.stdout
    assert "on a testbed of 2 hosts at 200mbit" in out.stdout, out.stdout
    through = [l for l in out.stdout.splitlines() if "operations through the switch" in l]
    assert through and not through[0].startswith("cais: 0 of"), out.stdout
    after = set(subprocess.run(["ip", "netns", "list"], capture_output=True,
                               text=True).stdout.split())
    assert not [n for n in after - before if n.startswith("inca-tp")], after - before


def run_racks(uplink_rate, *extra):
    """scripts/testbed.py perf on 2 racks x 2 hosts at 200 Mbit/s, 1 MiB:
    the run and its JSON, after checking that it succeeded, left nothing
    behind, and that the tree's row is exact on the switch path."""
    name = instance_name("r")
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "testbed.py"), "perf",
                        "--name", name, "--racks", "2", "--hosts-per-rack", "2", "--rate",
                        "200mbit", "--uplink-rate", uplink_rate, "-b", "1M", "-e", "1M",
                        "--iters", "2", "--warmup", "1"] + list(extra),
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, INCA_BUILD_DIR=launch.build_dir()))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert leftovers(name) == []
    res = json.loads(p.stdout.strip().splitlines()[-1])
    row = res["rows"][0]
    assert row["wrong"] == 0, row
    assert row["tree"]["path"] == "switch" and row["tree"]["host_ops"] == 0, row
    return p, res


def test_two_tiers_of_racks_run_the_tree_gloo_and_flat_exact_and_leave_nothing():
    # perf --racks 2 --hosts-per-rack 2: a leaf namespace per rack with its
    # inca-switchd, the spine with the root and the aggregation manager,
    # shaped uplinks. The tree's all-reduces go up through the leaves (the
    # root's slot holding and leaf 0's partials say so), Gloo's ring and the
    # flat switch run on the same hosts; every result exact; nothing left.
    p, res = run_racks("100mbit")
    row = res["rows"][0]
    assert row["flat"]["path"] == "switch" and row["gloo"]["path"] == "host", row
    leaf = res["slot_holding"]["leaf0"]
    assert leaf["uplink_partials"] > 0 and leaf["completed_chunks"] > 0, res["slot_holding"]
    assert res["slot_holding"]["root"]["uplink_partials"] == 0, res["slot_holding"]
    # The bounds follow the slowest link: 100 Mbit/s uplinks carry the tree's
    # tensor once each way, the ring's 2(n-1)/n of it once (rack order),
    # the flat switch's twice (2 hosts per rack).
    b = row["bounds_us"]
    assert b["flat_s"] == pytest.approx(2 * b["tree_s"], rel=1e-6)
    assert 1.4 < b["ring_s"] / b["tree_s"] < 1.6
    assert "tree/gloo" in p.stdout and "slot holding at the root" in p.stdout


def test_a_tree_of_racks_over_ipv6_is_exact_on_the_switch_path_and_leaves_nothing():
    # The same two tiers with --ipv6: the switches listen, the topology
    # names them and the hosts, and the ranks send, on IPv6 addresses.
    p, res = run_racks("200mbit", "--ipv6", "--backends", "tree")
    assert "backend switch [2001:2:0:" in p.stdout, p.stdout[-3000:]
    assert res["slot_holding"]["leaf0"]["uplink_partials"] > 0, res["slot_holding"]


def test_ring_crossings_and_tree_bounds_follow_the_placement():
    from inca_testbed import tree
    assert tree.ring_crossings([0, 1, 2, 3, 4, 5, 6, 7], 4, 2) == 1
    assert tree.ring_crossings([0, 4, 1, 5, 2, 6, 3, 7], 4, 2) == 4  # every edge crosses
    a = cli.perf_options(["--racks", "2", "--hosts-per-rack", "4", "--rate", "500mbit",
                          "--uplink-rate", "500mbit"])
    assert a.backends == "tree,gloo,flat"
    b = tree.tree_bounds(16 << 20, a, crossings=4)
    one = perf.wire_bounds(16 << 20, 8, 500e6, 9000, 8952)
    assert b["tree_s"] == pytest.approx(one["switch_s"])  # uplink no slower than a host link
    assert b["ring_s"] == pytest.approx(4 * one["ring_s"])
    assert b["flat_s"] == pytest.approx(4 * one["switch_s"])
