"""A multi-host testbed on one machine: a star of network namespaces.

    sudo scripts/testbed.py up --name tb --hosts 4 --rate 1gbit      # builds it
    sudo scripts/testbed.py exec --name tb --host 0 -- ip addr        # runs in host 0
    sudo scripts/testbed.py status                                    # lists instances
    sudo scripts/testbed.py down --name tb                            # removes it
    sudo scripts/testbed.py reap                                      # removes orphans

N host namespaces (inca-NAME-h0 ... ) and a switch namespace (inca-NAME-sw)
holding a Linux bridge; each host has one veth (eth0) whose other end is a
port of the bridge. Addresses come from the benchmarking range 198.18.0.0/15
(RFC 2544), one /24 per instance: the switch is .1, host i is .(10+i). With
ipv6 every namespace also gets an address from the IPv6 benchmarking range
2001:2::/48 (RFC 5180), one /64 per instance, 2001:2:0:S::1 for the switch
and 2001:2:0:S::(10+i) for host i (S: the instance's subnet, in hex).
Every host link is shaped in both directions (tbf: rate, burst and a
stated queue limit; optionally delay, jitter and reordering, and loss and
duplication); the switch namespace's own address on the bridge is not a
host link and is never shaped. Delay, jitter and reordering are netem's
where the kernel has sch_netem, and otherwise inca-linkdelay's, a user-space
delay line spliced into the link in the switch namespace (the same
semantics). docs/testbed.md has the details.

As a library (the tests and benchmarks import it): the package inca_testbed,
whose net module is the network, perf, olaf and reflect the runs; this module
(cli) is their command line and imports them, never the other way round.
scripts/testbed.py runs it.

An instance records its owner process in /run/inca-testbed/NAME.json; `reap`
(and every `up`) removes instances whose owner is gone, so a crashed test
leaves nothing behind for long. Needs root (CAP_NET_ADMIN).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import List, Optional

from . import olaf, perf, reflect, tree
from .net import (LinkShape, Testbed, TestbedError, instances, interrupt_on_sigterm, netns_list,
                  parse_host_rates, probe_main, reap, require_root)


def _shape_from(a, prefix: str = "") -> LinkShape:
    g = lambda k: getattr(a, prefix + k, None) or getattr(a, k, None)  # noqa: E731
    return LinkShape(rate=g("rate"), burst=a.burst, latency=a.latency, limit_bytes=a.limit_bytes,
                     delay=a.delay, jitter=a.jitter, loss=a.loss, duplicate=a.duplicate,
                     reorder=a.reorder)


def perf_options(argv: List[str]) -> argparse.Namespace:
    """`perf`'s options from its command-line words (for scripts/bench-testbed.py)."""
    return _finish(_parser().parse_args(["perf"] + list(argv)))


def _finish(a: argparse.Namespace) -> argparse.Namespace:
    """Defaults that follow from other options: perf's chunk is the largest
    CAIS payload one MTU carries (IPv4: 20 + 8 + 20 bytes of headers; IPv6:
    40 + 8 + 20)."""
    if getattr(a, "cmd", None) == "perf" and not 1 <= a.switches <= 8:
        raise TestbedError("--switches %d: between 1 and 8" % a.switches)
    if getattr(a, "cmd", None) == "perf" and a.racks > 1 and (a.switches != 1 or a.delay or
                                                               a.jitter):
        raise TestbedError("--racks runs one switch per rack, no delay or jitter "
                           "(loss applies to rack 0's uplink)")
    if getattr(a, "cmd", None) == "perf" and a.racks > 1 and a.backends == "switch,gloo":
        a.backends = "tree,gloo,flat"
    if getattr(a, "cmd", None) == "perf" and a.chunk_size is None:
        a.chunk_size = a.mtu - (perf.IP6_UDP_CAIS if a.ipv6 else perf.IP_UDP_CAIS)
    return a


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="build (or rebuild) an instance")
    up.add_argument("--name", default="tb")
    up.add_argument("--hosts", type=int, default=4)
    up.add_argument("--mtu", type=int, default=9000)
    up.add_argument("--ipv6", action="store_true", help="IPv6 addresses too (2001:2::/48)")
    up.add_argument("--rate", help="both directions of every host link, e.g. 1gbit")
    up.add_argument("--up-rate", help="host -> switch only")
    up.add_argument("--down-rate", help="switch -> host only")
    up.add_argument("--host-rate", action="append", default=[], metavar="I=RATE",
                    help="host I's link, both directions (repeatable)")
    up.add_argument("--burst", default="256kb")
    up.add_argument("--latency", default="20ms", help="tbf queue: longest wait")
    up.add_argument("--limit-bytes", type=int, help="tbf queue in bytes (instead of --latency)")
    for k in ("delay", "jitter", "loss", "duplicate", "reorder"):
        up.add_argument("--" + k, help="%s, both directions (netem's syntax)" % k)
    up.add_argument("--owner-pid", type=int, help="remove the instance when this process exits")
    down = sub.add_parser("down", help="remove an instance")
    down.add_argument("--name", default="tb")
    sub.add_parser("reap", help="remove instances whose owner has exited")
    me = sub.add_parser("measure", help="what each host link does to datagrams (loss, "
                        "duplication, reordering), both directions")
    me.add_argument("--name", default="tb")
    me.add_argument("--count", type=int, default=2000)
    sub.add_parser("status", help="list instances")
    pf = sub.add_parser("perf", help="all-reduce on a testbed: switch against gloo, with bounds")
    pf.add_argument("--name", default="perf")
    pf.add_argument("--hosts", type=int, default=4)
    pf.add_argument("--rate", default="1gbit")
    pf.add_argument("--mtu", type=int, default=9000)
    pf.add_argument("--switches", type=int, default=1,
                    help="inca-switchd processes in the switch namespace; the ranks stripe every "
                         "operation over them (INCA_SWITCH=a,b,...)")
    pf.add_argument("--ipv6", action="store_true",
                    help="the switch path over IPv6 (2001:2::/48); the host path stays on IPv4")
    pf.add_argument("--racks", type=int, default=1,
                    help="two tiers: R racks, each a leaf switch, under a spine (the root)")
    pf.add_argument("--hosts-per-rack", type=int, default=4, help="with --racks")
    pf.add_argument("--uplink-rate", default="1gbit", help="with --racks: each leaf-spine link")
    pf.add_argument("--placement", choices=("rack", "random"), default="rack",
                    help="with --racks: ranks in rack order, or shuffled (--seed)")
    pf.add_argument("--seed", type=int, default=1, help="with --placement random")
    pf.add_argument("--burst", default="256kb")
    pf.add_argument("--latency", default="20ms")
    pf.add_argument("--limit-bytes", type=int)
    pf.add_argument("--host-rate", action="append", default=[], metavar="I=RATE",
                    help="host I's link, both directions (repeatable)")
    for k in ("delay", "jitter", "loss", "duplicate", "reorder"):
        pf.add_argument("--" + k, help="%s, both directions (netem's syntax)" % k)
    pf.add_argument("-b", "--min-bytes", default="16M")
    pf.add_argument("-e", "--max-bytes", default="64M")
    pf.add_argument("-f", "--factor", type=float, default=4)
    pf.add_argument("--iters", type=int, default=5)
    pf.add_argument("--warmup", type=int, default=1)
    pf.add_argument("--warmup-ms", type=int, default=0,
                    help="also warm up each size this long (cais-perf --warmup-ms)")
    pf.add_argument("--duration-ms", type=int, default=0,
                    help="time each size at least this long (cais-perf --duration-ms; "
                         "jobs side by side)")
    pf.add_argument("--chunk-size", type=int,
                    help="CAIS payload per datagram (default: what the MTU carries, 8952 B at "
                         "9000 over IPv4, 8932 B over IPv6)")
    pf.add_argument("--window", type=int, help="client window (default: cais-perf's)")
    pf.add_argument("--backends", default="switch,gloo")
    pf.add_argument("--switchd-arg", action="append", default=[], help="extra inca-switchd flag")
    pf.add_argument("--perf-arg", action="append", default=[], help="extra cais-perf flag")
    pf.add_argument("--timeout", type=float, default=600, help="seconds per backend")
    ol = sub.add_parser("olaf", help="OLAF training (olaf-train run) across a testbed: PS on "
                        "host 0, workers on the others, the bottleneck the switch's or a link")
    olaf.add_arguments(ol)
    rf = sub.add_parser("reflect", help="the switch namespace's I/O paths (sockets, io_uring, "
                        "AF_XDP) reflecting datagrams from host 0, against each other")
    reflect.add_arguments(rf)
    ex = sub.add_parser("exec", help="run a command in a host (or the switch) namespace")
    ex.add_argument("--name", default="tb")
    ex.add_argument("--host", default="sw", help="host index, or sw")
    ex.add_argument("argv", nargs=argparse.REMAINDER)
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    ap = _parser()
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_probe"]:
        return probe_main(argv[1:])
    a = ap.parse_args(argv)
    interrupt_on_sigterm()
    try:
        a = _finish(a)
        require_root()
        if a.cmd == "up":
            host_shapes = {}
            for i, rate in parse_host_rates(a.host_rate).items():
                host_shapes[i] = _shape_from(a)
                host_shapes[i].rate = rate
            tb = Testbed(a.name, a.hosts, up_shape=_shape_from(a, "up_"),
                         down_shape=_shape_from(a, "down_"), host_shapes=host_shapes, mtu=a.mtu,
                         owner_pid=a.owner_pid, ipv6=a.ipv6)
            tb.up()

            def both(v4: str, v6: str) -> str:
                return "%s and %s" % (v4, v6) if a.ipv6 else v4
            print("testbed %s: switch %s in %s, hosts %s" % (
                a.name, both(tb.switch_ip, tb.switch_ip6), tb.switch_ns,
                ", ".join("%s in %s" % (both(tb.host_ip(i), tb.host_ip6(i)), tb.host_ns(i))
                          for i in range(a.hosts))))
        elif a.cmd == "down":
            Testbed(a.name, 1).down()
        elif a.cmd == "reap":
            for name in reap():
                print("removed", name)
        elif a.cmd == "measure":
            st = [i for i in instances() if i.get("name") == a.name]
            if not st:
                raise TestbedError("no testbed %s: scripts/testbed.py up --name %s" % (a.name,
                                                                                      a.name))
            tb = Testbed(a.name, st[0]["hosts"])
            tb.subnet = st[0]["subnet"]
            for i in range(tb.hosts):
                for d in ("up", "down"):
                    m = tb.measure(i, d, a.count)
                    print("host %d %-4s lost %.2f%% duplicated %.2f%% reordered %.2f%% (%d sent)"
                          % (i, d, 100 * m["lost"], 100 * m["duplicated"], 100 * m["reordered"],
                             m["sent"]))
        elif a.cmd == "perf":
            res = tree.tree_perf(a) if a.racks > 1 else perf.perf(a)
            return 1 if any(r["wrong"] for r in res["rows"]) else 0
        elif a.cmd == "olaf":
            olaf.run(a)
        elif a.cmd == "reflect":
            reflect.run(a)
        elif a.cmd == "status":
            for inst in instances():
                print(json.dumps(inst))
        elif a.cmd == "exec":
            cmd = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
            if not cmd:
                raise TestbedError("exec needs a command after --")
            tb = Testbed(a.name, 1)
            ns = tb.switch_ns if a.host == "sw" else tb.host_ns(int(a.host))
            if ns not in netns_list():
                raise TestbedError("no namespace %s: is testbed %s up?" % (ns, a.name))
            return subprocess.call(["ip", "netns", "exec", ns] + cmd)
    except TestbedError as e:
        print("testbed: %s" % e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("testbed: interrupted; what was built was removed", file=sys.stderr)
        return 130
    return 0

