"""The testbed's network: a star of network namespaces on one machine
(Testbed, LinkShape, instances and their reaping). The command line is
inca_testbed.cli (scripts/testbed.py), whose docstring describes the
testbed; the perf, OLAF and reflector runs are inca_testbed.perf, .olaf and
.reflect, each importing this module.

    from inca_testbed.net import Testbed, LinkShape
    with Testbed("t1", hosts=3, shape=LinkShape(rate="200mbit")) as tb:
        p = tb.popen(tb.host_ns(0), ["ping", "-c1", tb.switch_ip])
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Sequence

STATE_DIR = "/run/inca-testbed"
# python/inca_testbed/net.py in the checkout (the build links it, so follow the link)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
PREFIX = "inca-"
NAME_RE = re.compile(r"^[a-z0-9]{1,8}$")
MAX_HOSTS = 64
MAX_RACKS = 16


class TestbedError(RuntimeError):
    """A one-line reason the testbed could not be built or changed."""


_RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
               "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9}


def parse_host_rates(specs: Sequence[str]) -> Dict[int, str]:
    """--host-rate I=RATE words as {host index: rate}; TestbedError for one
    that is not like 2=500mbit."""
    rates = {}
    for spec in specs:
        i, _, rate = spec.partition("=")
        if not i.isdigit() or not rate:
            raise TestbedError("--host-rate %r is not like 2=500mbit" % spec)
        rates[int(i)] = rate
    return rates


def parse_rate(rate: str) -> float:
    """tc's rate syntax ("1gbit", "500mbit", "2.5gbit") to bits per second."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-z]+)\s*", rate.lower())
    if not m or m.group(2) not in _RATE_UNITS:
        raise TestbedError("rate %r is not like 1gbit, 500mbit or 100kbit" % rate)
    return float(m.group(1)) * _RATE_UNITS[m.group(2)]


def _size_bytes(s: str) -> int:
    m = re.fullmatch(r"\s*([0-9]+)\s*(b|kb|k|mb|m)?\s*", s.lower())
    if not m:
        raise TestbedError("size %r is not like 256kb, 1mb or 9000" % s)
    return int(m.group(1)) * {None: 1, "b": 1, "k": 1024, "kb": 1024, "m": 1 << 20,
                              "mb": 1 << 20}[m.group(2)]


def _fraction(s: Optional[str], what: str) -> float:
    if not s:
        return 0.0
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", s)
    if not m:
        raise TestbedError("%s %r is not like 1%% or 0.01" % (what, s))
    v = float(m.group(1)) / (100.0 if m.group(2) else 1.0)
    if not 0.0 <= v <= 1.0:
        raise TestbedError("%s %r must be between 0 and 100%%" % (what, s))
    return v


@dataclass
class LinkShape:
    """One direction of a host link. rate None: unshaped. Queue: `limit_bytes`
    when given, else `latency` (the longest a packet may wait at `rate`).
    delay, jitter and reorder are netem's (netem reorders only delayed
    packets; without sch_netem, inca-linkdelay does the same in user space).
    loss and duplicate are fractions ("1%")
    applied by a tc eBPF program (tools/testbed/impair.bpf.c) on the clsact
    egress hook, which every kernel with cls_bpf runs, netem or not."""
    rate: Optional[str] = None
    burst: str = "256kb"
    latency: str = "20ms"
    limit_bytes: Optional[int] = None
    delay: Optional[str] = None     # netem, e.g. "2ms"
    jitter: Optional[str] = None    # netem, with delay
    loss: Optional[str] = None      # e.g. "1%"
    duplicate: Optional[str] = None
    reorder: Optional[str] = None

    def netem_args(self) -> List[str]:
        a: List[str] = []
        if self.delay:
            a += ["delay", self.delay] + ([self.jitter] if self.jitter else [])
        elif self.jitter:
            raise TestbedError("jitter needs a delay")
        if _fraction(self.reorder, "reorder") > 0:
            if not self.delay:
                raise TestbedError("netem reorders only delayed packets: give a delay too")
            a += ["reorder", self.reorder]
        return a

    def delays(self) -> bool:
        return bool(self.netem_args())

    def linkdelay_args(self, direction: str) -> List[str]:
        """inca-linkdelay's flags for this shape as `direction` (up/down)."""
        a = ["--%s-delay" % direction, self.delay or "0",
             "--%s-jitter" % direction, self.jitter or "0"]
        r = _fraction(self.reorder, "reorder")
        return a + (["--%s-reorder" % direction, repr(r)] if r > 0 else [])

    def impaired(self) -> bool:
        return any(_fraction(v, k) > 0 for k, v in (("loss", self.loss),
                                                     ("duplicate", self.duplicate)))

    def queue_bytes(self) -> int:
        if self.limit_bytes is not None:
            return self.limit_bytes
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(us|ms|s)\s*", self.latency)
        if not m:
            raise TestbedError("latency %r is not like 20ms" % self.latency)
        secs = float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]
        rate = parse_rate(self.rate) if self.rate else 10e9
        return max(16384, int(rate / 8 * secs) + _size_bytes(self.burst))

    def validate(self) -> None:
        if self.rate is not None:
            parse_rate(self.rate)
        _size_bytes(self.burst)
        self.netem_args()
        for k in ("loss", "duplicate", "reorder"):
            _fraction(getattr(self, k), k)
        self.queue_bytes()


def die_with_parent(sig: int = signal.SIGTERM):
    """A preexec_fn for Popen: the child gets `sig` when this process dies,
    however it dies (SIGKILL included), and exits at once if this process
    died between fork and exec. `ip netns exec` execs in place, so the
    program it runs keeps the signal. For the processes of one measurement
    (a switch, ranks), not for the testbed's daemons (inca-linkdelay), which
    outlive `testbed up` on purpose."""
    libc = ctypes.CDLL(None, use_errno=True)  # loaded here, not in the forked child
    parent = os.getpid()

    def set_it() -> None:
        libc.prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(128 + int(sig))
    return set_it


def run(argv: Sequence[str], check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(list(argv), capture_output=True, text=True)
    if check and p.returncode != 0:
        raise TestbedError("%s: %s" % (" ".join(argv), (p.stderr or p.stdout).strip()))
    return p


def netns_list() -> List[str]:
    p = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def _alive(pid: Optional[int]) -> bool:
    if not pid:
        return True  # no owner: kept until `down`
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def require_root() -> None:
    if os.geteuid() != 0:
        raise TestbedError("the testbed creates network namespaces, veth pairs and qdiscs: run it "
                           "as root (sudo scripts/testbed.py ...)")


class Testbed:
    """A star of namespaces; see the module docstring."""

    def __init__(self, name: str, hosts: int, shape: Optional[LinkShape] = None,
                 up_shape: Optional[LinkShape] = None, down_shape: Optional[LinkShape] = None,
                 host_shapes: Optional[Dict[int, LinkShape]] = None, mtu: int = 9000,
                 owner_pid: Optional[int] = None, ipv6: bool = False) -> None:
        if not NAME_RE.match(name):
            raise TestbedError("testbed name %r must be 1-8 lowercase letters or digits "
                               "(it prefixes namespace and interface names)" % name)
        if not 1 <= hosts <= MAX_HOSTS:
            raise TestbedError("hosts %d must be 1..%d" % (hosts, MAX_HOSTS))
        if not 1280 <= mtu <= 65535:
            raise TestbedError("mtu %d must be 1280..65535" % mtu)
        self.name, self.hosts, self.mtu, self.ipv6 = name, hosts, mtu, ipv6
        self.racks = 1  # inca_testbed.racks.RackTestbed: more
        base = shape or LinkShape()
        self.up_shape = up_shape or base        # host -> switch
        self.down_shape = down_shape or base    # switch -> host
        self.host_shapes = dict(host_shapes or {})  # per host, both directions
        for s in [self.up_shape, self.down_shape] + list(self.host_shapes.values()):
            s.validate()
        self.owner_pid = owner_pid
        self.subnet: Optional[int] = None
        self.netem: Optional[bool] = None  # the kernel has sch_netem (probed in up)
        self.linkdelay_counters: Dict[int, dict] = {}  # host -> counters, after down()
        self.linkdelay_pids: Dict[int, int] = {}  # group -> running inca-linkdelay

    # ---- names and addresses
    @property
    def switch_ns(self) -> str:
        return "%s%s-sw" % (PREFIX, self.name)

    def host_ns(self, i: int) -> str:
        return "%s%s-h%d" % (PREFIX, self.name, i)

    def leaf_ns(self, k: int) -> str:
        """Rack k's namespace (racks > 1): its bridge, its leaf switch."""
        return "%s%s-l%d" % (PREFIX, self.name, k)

    def port_ns(self, i: int) -> str:
        """Where host i's link ends: the switch's namespace (a rack's in a
        RackTestbed)."""
        return self.switch_ns

    @property
    def switch_ip(self) -> str:
        return "198.18.%d.1" % self.subnet

    def host_ip(self, i: int) -> str:
        return "198.18.%d.%d" % (self.subnet, 10 + i)

    @property
    def switch_ip6(self) -> str:
        return "2001:2:0:%x::1" % self.subnet

    def host_ip6(self, i: int) -> str:
        return "2001:2:0:%x::%x" % (self.subnet, 10 + i)

    def data_ip(self, i: Optional[int] = None) -> str:
        """The address a job's switch traffic uses: the switch's (i None) or
        host i's, IPv6 on an ipv6 instance."""
        if i is None:
            return self.switch_ip6 if self.ipv6 else self.switch_ip
        return self.host_ip6(i) if self.ipv6 else self.host_ip(i)

    @staticmethod
    def endpoint(ip: str, port: int) -> str:
        """host:port, an IPv6 address in brackets."""
        return ("[%s]:%d" if ":" in ip else "%s:%d") % (ip, port)

    def shape_of(self, i: int, direction: str) -> LinkShape:
        if i in self.host_shapes:
            return self.host_shapes[i]
        return self.up_shape if direction == "up" else self.down_shape

    def state_path(self) -> str:
        return os.path.join(STATE_DIR, self.name + ".json")

    # ---- lifecycle
    def up(self) -> "Testbed":
        """Builds the instance; idempotent (an existing instance of this name
        is removed first). On any failure, or Ctrl-C, removes what it made."""
        require_root()
        reap()
        if os.path.exists(self.state_path()) or self.switch_ns in netns_list():
            self.down()
        self.subnet = _free_subnet()
        os.makedirs(STATE_DIR, exist_ok=True)
        self._write_state()  # first, so that a crash mid-way is reaped
        try:
            self._build()
            self._write_state()  # with what the build found (netem or not)
        except BaseException:
            self.down()
            raise
        return self

    def _write_state(self) -> None:
        tmp = self.state_path() + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"name": self.name, "hosts": self.hosts, "subnet": self.subnet,
                       "mtu": self.mtu, "owner_pid": self.owner_pid, "created": time.time(),
                       "ipv6": self.ipv6, "racks": self.racks,
                       "netem": self.netem,
                       "up": asdict(self.up_shape), "down": asdict(self.down_shape),
                       "host_shapes": {str(k): asdict(v) for k, v in self.host_shapes.items()}},
                      f)
        os.replace(tmp, self.state_path())

    def _delayed(self, i: int) -> bool:
        """Host i's link has a delay line: it asks for delay and netem is absent."""
        return self.netem is False and (self.shape_of(i, "up").delays() or
                                        self.shape_of(i, "down").delays())

    def _probe_netem(self) -> bool:
        p = run(["ip", "netns", "exec", self.switch_ns, "tc", "qdisc", "add", "dev", "lo", "root",
                  "netem", "delay", "1ms"], check=False)
        if p.returncode == 0:
            self.sw_exec(["tc", "qdisc", "del", "dev", "lo", "root"])
        return p.returncode == 0

    def _build(self) -> None:
        sw = self.switch_ns
        run(["ip", "netns", "add", sw])
        self.sw_exec(["ip", "link", "set", "lo", "up"])
        self.netem = self._probe_netem()
        self.sw_exec(["ip", "link", "add", "br0", "type", "bridge"])
        self.sw_exec(["ip", "link", "set", "br0", "mtu", str(self.mtu)])
        self.sw_exec(["ip", "addr", "add", self.switch_ip + "/24", "dev", "br0"])
        if self.ipv6:  # nodad: usable at once, no duplicate detection to wait for
            self.sw_exec(["ip", "-6", "addr", "add", self.switch_ip6 + "/64", "dev", "br0",
                          "nodad"])
        self.sw_exec(["ip", "link", "set", "br0", "up"])
        for i in range(self.hosts):
            h = self.host_ns(i)
            run(["ip", "netns", "add", h])
            run(["ip", "netns", "exec", h, "ip", "link", "set", "lo", "up"])
            port = "p%d" % i
            # Created inside the switch namespace: no name can clash with the
            # root namespace's or another instance's interfaces.
            self.sw_exec(["ip", "link", "add", port, "mtu", str(self.mtu), "type", "veth", "peer",
                          "name", "eth0", "mtu", str(self.mtu), "netns", h])
            if self._delayed(i):
                # host eth0 -- pI == inca-linkdelay == qI -- dI (bridge port):
                # the delay line sits between the host's link and the bridge.
                self.sw_exec(["ip", "link", "add", "d%d" % i, "mtu", str(self.mtu), "type", "veth",
                              "peer", "name", "q%d" % i, "mtu", str(self.mtu)])
                self.sw_exec(["ip", "link", "set", "d%d" % i, "master", "br0"])
                for dev in ("d%d" % i, "q%d" % i):
                    self.sw_exec(["ip", "link", "set", dev, "up"])
            else:
                self.sw_exec(["ip", "link", "set", port, "master", "br0"])
            self.sw_exec(["ip", "link", "set", port, "up"])
            run(["ip", "netns", "exec", h, "ip", "addr", "add", self.host_ip(i) + "/24", "dev",
                  "eth0"])
            if self.ipv6:
                run(["ip", "netns", "exec", h, "ip", "-6", "addr", "add",
                      self.host_ip6(i) + "/64", "dev", "eth0", "nodad"])
            run(["ip", "netns", "exec", h, "ip", "link", "set", "eth0", "up"])
            self._shape(h, "eth0", self.shape_of(i, "up"), self._delayed(i))
            self._shape(sw, port, self.shape_of(i, "down"), self._delayed(i))
        self._start_linkdelays()
        self._static_neighbours()

    def _linkdelay_log(self, g: int) -> str:
        return os.path.join(STATE_DIR, "%s-d%d.linkdelay.log" % (self.name, g))

    def _start_linkdelays(self) -> None:
        """One inca-linkdelay for all delayed hosts that share their delays
        (one event loop for many links costs less CPU than one per link);
        waits (5 s at most) until each has its ports open."""
        groups: Dict[tuple, List[int]] = {}
        for i in range(self.hosts):
            if self._delayed(i):
                key = (tuple(self.shape_of(i, "up").linkdelay_args("up")),
                       tuple(self.shape_of(i, "down").linkdelay_args("down")))
                groups.setdefault(key, []).append(i)
        if not groups:
            return
        build = os.environ.get("INCA_BUILD_DIR") or os.path.join(REPO, "build", "release")
        binary = os.path.join(build, "bin", "inca-linkdelay")
        if not os.access(binary, os.X_OK):
            raise TestbedError("delay without netem needs %s: build it (scripts/setup.sh) or set "
                               "INCA_BUILD_DIR" % binary)
        for g, ((up, down), hosts) in enumerate(sorted(groups.items(), key=lambda kv: kv[1])):
            argv = [binary, "--seed", str(1 + hosts[0])] + list(up) + list(down)
            for i in hosts:
                argv += ["--link", "p%d,q%d" % (i, i)]
            log = self._linkdelay_log(g)
            with open(log, "w") as out, open(log + ".err", "w") as err:
                p = self.popen(self.switch_ns, argv, stdout=out, stderr=err)
            deadline = time.monotonic() + 5
            while True:
                with open(log) as f:
                    if f.readline().strip() == "ready":
                        self.linkdelay_pids[g] = p.pid  # `ip netns exec` execs it: same pid
                        break
                if p.poll() is not None or time.monotonic() > deadline:
                    with open(log + ".err") as f:
                        why = f.read().strip().splitlines()[-1:] or ["did not start in 5 s"]
                    raise TestbedError("inca-linkdelay for hosts %s: %s" % (hosts, why[0]))
                time.sleep(0.01)  # bounded (5 s) wait for a child to open its sockets

    def _collect_linkdelay(self) -> None:
        """After the switch namespace's processes are gone: each delay line's
        final counters, per host, then its logs removed."""
        self.linkdelay_pids.clear()
        for g in range(MAX_HOSTS):
            log = self._linkdelay_log(g)
            if not os.path.exists(log):
                continue
            with open(log) as f:
                lines = [l for l in f.read().splitlines() if l.startswith("{")]
            with contextlib.suppress(ValueError, KeyError, IndexError):
                for link in json.loads(lines[-1])["links"]:
                    self.linkdelay_counters[int(link["host_port"][1:])] = link
            for fn in (log, log + ".err"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(fn)

    def _static_neighbours(self) -> None:
        """Permanent ARP entries everywhere: no neighbour discovery on the
        shaped links, so the first packets of a run are not queued behind it
        and an impaired link cannot lose it."""
        def mac(ns: str, dev: str) -> str:
            info = json.loads(run(["ip", "netns", "exec", ns, "ip", "-j", "link", "show", dev])
                              .stdout)
            return info[0]["address"]
        nodes = [(self.switch_ns, "br0", self.switch_ip)] + [
            (self.host_ns(i), "eth0", self.host_ip(i)) for i in range(self.hosts)]
        nodes += self._more_neighbours()
        if self.ipv6:  # neighbour discovery too
            nodes += [(self.switch_ns, "br0", self.switch_ip6)] + [
                (self.host_ns(i), "eth0", self.host_ip6(i)) for i in range(self.hosts)]
        macs = {ip: mac(ns, dev) for ns, dev, ip in nodes}
        for ns, dev, ip in nodes:
            for other_ns, _, other_ip in nodes:
                if other_ns != ns and (":" in other_ip) == (":" in ip):
                    run(["ip", "netns", "exec", ns, "ip", "neigh", "replace", other_ip, "lladdr",
                          macs[other_ip], "dev", dev, "nud", "permanent"])

    def _more_neighbours(self) -> List[tuple]:
        """(namespace, device, address) of other nodes on the segment."""
        return []

    def _shape(self, ns: str, dev: str, s: LinkShape, delay_line: bool = False) -> None:
        """netem at the root when delay, jitter or reorder are asked and
        no delay line does them, then tbf for the rate; loss and duplication
        by an eBPF program on the device's clsact egress hook, before the
        queue (tools/testbed/impair.bpf.c)."""
        tc = ["ip", "netns", "exec", ns, "tc"]
        run(tc + ["qdisc", "del", "dev", dev, "root"], check=False)
        run(tc + ["qdisc", "del", "dev", dev, "clsact"], check=False)
        netem = [] if delay_line else s.netem_args()
        parent = ["root"]
        if netem:
            p = run(tc + ["qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "limit",
                           "100000"] + netem, check=False)
            if p.returncode != 0:
                raise TestbedError(
                    "delay, jitter and reorder need the kernel's netem qdisc, which this kernel "
                    "lacks (CONFIG_NET_SCH_NETEM): %s; loss and duplicate work without it"
                    % (p.stderr.strip() or "unknown qdisc"))
            parent = ["parent", "1:1"]
        if s.rate:
            queue = (["limit", str(s.limit_bytes)] if s.limit_bytes is not None
                     else ["latency", s.latency])
            run(tc + ["qdisc", "add", "dev", dev] + parent + ["handle", "10:", "tbf", "rate",
                                                               s.rate, "burst", s.burst] + queue)
        if s.impaired():
            run(tc + ["qdisc", "add", "dev", dev, "clsact"])
            run(tc + ["filter", "add", "dev", dev, "egress", "bpf", "direct-action", "obj",
                       self._impair_object(s), "sec", "tc"])

    def _impair_object(self, s: LinkShape) -> str:
        """Builds tools/testbed/impair.bpf.c for these fractions (cached)."""
        t = {k: min(0xFFFFFFFF, int(_fraction(getattr(s, k), k) * 2 ** 32))
             for k in ("loss", "duplicate")}
        src = os.path.join(REPO, "tools", "testbed", "impair.bpf.c")
        with open(src, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:12]
        obj = os.path.join(STATE_DIR, "impair-%s-%x-%x.o" % (digest, t["loss"], t["duplicate"]))
        if not os.path.exists(obj):
            p = run(["clang", "-O2", "-target", "bpf", "-I/usr/include/%s-linux-gnu" %
                      os.uname().machine, "-DLOSS=%du" % t["loss"],
                      "-DDUPLICATE=%du" % t["duplicate"], "-c", src, "-o", obj + ".tmp"],
                     check=False)
            if p.returncode != 0:
                raise TestbedError("building the link impairment (clang -target bpf, needs "
                                   "libbpf-dev): %s" % p.stderr.strip().splitlines()[-1:])
            os.replace(obj + ".tmp", obj)
        return obj

    def tbf_parent(self, i: int, direction: str) -> List[str]:
        """Where host i's tbf sits in that direction, for `tc qdisc change`:
        under netem when netem does the delay, else at the root."""
        netem = not self._delayed(i) and self.shape_of(i, direction).netem_args()
        return ["parent", "1:1"] if netem else ["root"]

    def set_shape(self, i: int, direction: str, s: LinkShape) -> None:
        """Changes one direction of host i's link at run time (a rate step).
        A delay line's delays are fixed when it starts: with one, only the
        rate, queue, loss and duplication can change."""
        s.validate()
        if direction not in ("up", "down"):
            raise TestbedError("direction must be up or down")
        if self._delayed(i) and s.netem_args() != self.shape_of(i, direction).netem_args():
            raise TestbedError("host %d's delay is inca-linkdelay's (no netem here): it cannot "
                               "change at run time" % i)
        ns, dev = ((self.host_ns(i), "eth0") if direction == "up" else
                   (self.port_ns(i), "p%d" % i))
        self._shape(ns, dev, s, self._delayed(i))

    def down(self) -> None:
        """Removes the instance; idempotent. Killing the namespaces' processes
        first: a namespace with processes in it would outlive `ip netns del`."""
        for ns in ([self.host_ns(i) for i in range(MAX_HOSTS)] + [self.switch_ns] +
                   [self.leaf_ns(k) for k in range(MAX_RACKS)]):
            if ns in netns_list():
                _kill_in(ns)
                run(["ip", "netns", "del", ns], check=False)
        self._collect_linkdelay()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.state_path())

    # ---- running things inside
    def sw_exec(self, argv: Sequence[str]) -> subprocess.CompletedProcess:
        return run(["ip", "netns", "exec", self.switch_ns] + list(argv))

    def popen(self, ns: str, argv: Sequence[str], **kw) -> subprocess.Popen:
        """`argv` in namespace `ns`; pass preexec_fn=die_with_parent() for a
        process that must not outlive this script."""
        return subprocess.Popen(["ip", "netns", "exec", ns] + list(argv), **kw)

    def link_stats(self) -> List[dict]:
        """Per host and direction, from tc's own counters (what the queues
        actually did): packets and bytes sent and dropped (a full queue).
        Impairment drops happen before the queue: `measure` counts them."""
        out = []
        for i in range(self.hosts):
            for direction, ns, dev in (("up", self.host_ns(i), "eth0"),
                                       ("down", self.switch_ns, "p%d" % i)):
                text = run(["ip", "netns", "exec", ns, "tc", "-s", "qdisc", "show", "dev",
                             dev]).stdout
                root = text.split("\n qdisc")[0]  # the first qdisc listed is the root
                sent = [int(x) for x in re.findall(r"Sent \d+ bytes (\d+) pkt", root)]
                nbytes = [int(x) for x in re.findall(r"Sent (\d+) bytes", root)]
                dropped = [int(x) for x in re.findall(r"dropped (\d+)", text)]
                out.append({"host": i, "direction": direction,
                            "packets": max(sent or [0]), "bytes": max(nbytes or [0]),
                            "dropped": sum(dropped)})
        return out

    def measure(self, i: int, direction: str = "up", count: int = 2000,
                size: int = 1000) -> dict:
        """What host i's link does to datagrams, measured end to end: `count`
        numbered datagrams of `size` bytes, paced well below the link rate,
        from host i to the switch (up) or back (down); returns the fractions
        lost, duplicated and reordered (arrived after a higher number)."""
        here = os.path.join(REPO, "scripts", "testbed.py")
        rx_ns, tx_ns, dst = ((self.switch_ns, self.host_ns(i), self.switch_ip) if direction == "up"
                             else (self.host_ns(i), self.switch_ns, self.host_ip(i)))
        rx = self.popen(rx_ns, [sys.executable, here, "_probe", "rx", dst, str(count)],
                        stdout=subprocess.PIPE, text=True)
        try:
            line = rx.stdout.readline().split()
            if line[:1] != ["ready"]:
                raise TestbedError("probe receiver did not start: %r" % line)
            port = line[1]
            tx = self.popen(tx_ns, [sys.executable, here, "_probe", "tx", dst, port, str(count),
                                    str(size)])
            tx.wait(120)
            out, _ = rx.communicate(timeout=120)
        finally:
            if rx.poll() is None:
                rx.kill()
        return json.loads(out)

    def __enter__(self) -> "Testbed":
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()


def interrupt_on_sigterm() -> None:
    """SIGTERM (kill, timeout(1), a CI runner) tears down like Ctrl-C: it
    raises KeyboardInterrupt in the main thread, so every `with Testbed` and
    every process started under one is cleaned up on the way out. Python's
    default would end the process at once and leave the namespaces to the
    next reap."""
    def _raise(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, _raise)


def _kill_in(ns: str) -> None:
    p = run(["ip", "netns", "pids", ns], check=False)
    pids = [int(x) for x in p.stdout.split()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 2
        while pids and time.monotonic() < deadline:
            pids = [pid for pid in pids if os.path.exists("/proc/%d" % pid)]
            if pids:
                time.sleep(0.02)  # bounded wait for the kernel to reap them


def instances() -> List[dict]:
    out = []
    if not os.path.isdir(STATE_DIR):
        return out
    for fn in sorted(os.listdir(STATE_DIR)):
        if fn.endswith(".json"):
            try:
                with open(os.path.join(STATE_DIR, fn)) as f:
                    out.append(json.load(f))
            except (OSError, ValueError):
                out.append({"name": fn[:-5], "broken": True})
    return out


def _free_subnet() -> int:
    used = {i.get("subnet") for i in instances()}
    for k in range(255):
        if k not in used:
            return k
    raise TestbedError("all 255 testbed subnets of 198.18.0.0/16 are in use: "
                       "scripts/testbed.py status / down")


def reap() -> List[str]:
    """Removes instances whose owner process has exited, and namespaces of
    ours that no instance records. Returns the names removed."""
    removed = []
    known = set()
    for inst in instances():
        name = inst.get("name", "")
        if not NAME_RE.match(name):
            continue
        if inst.get("broken") or not _alive(inst.get("owner_pid")):
            Testbed(name, 1).down()
            removed.append(name)
        else:
            known.add(name)
    for ns in netns_list():
        m = re.fullmatch(PREFIX + r"([a-z0-9]{1,8})-(sw|h\d+|l\d+)", ns)
        if m and m.group(1) not in known:
            _kill_in(ns)
            run(["ip", "netns", "del", ns], check=False)
            if m.group(1) not in removed:
                removed.append(m.group(1))
    return removed


def probe_main(argv: List[str]) -> int:
    """`testbed.py _probe rx ADDR COUNT` / `_probe tx ADDR PORT COUNT SIZE`."""
    import socket
    import struct
    if argv[0] == "rx":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((argv[1], 0))
        s.settimeout(1.0)  # ends one quiet second after the last datagram
        print("ready %d" % s.getsockname()[1], flush=True)
        count, got = int(argv[2]), []
        with contextlib.suppress(socket.timeout):
            while len(got) < 4 * count:
                got.append(struct.unpack("!I", s.recv(65536)[:4])[0])
        seen = set(got)
        reordered, top = 0, -1
        for g in got:
            reordered += g < top
            top = max(top, g)
        print(json.dumps({"sent": count, "received": len(got), "lost": (count - len(seen)) / count,
                          "duplicated": (len(got) - len(seen)) / count,
                          "reordered": reordered / count}))
        return 0
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    count, size = int(argv[3]), max(4, int(argv[4]))
    for k in range(count):
        s.sendto(struct.pack("!I", k).ljust(size, b"."), (argv[1], int(argv[2])))
        if k % 16 == 15:
            time.sleep(0.001)  # pacing (bounded: count/16 ms), not synchronisation
    return 0

