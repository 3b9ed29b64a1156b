"""Two tiers of the testbed (docs/testbed.md, "Racks"): each rack a leaf
namespace (inca-NAME-lK) with its own bridge and its hosts, linked to the
spine's bridge (inca-NAME-sw) by a veth pair shaped both ways at the uplink
rate; one L2 segment and one /24 (and with --ipv6 one /64) across them
all, so that Gloo crosses racks over the uplinks like the switches' traffic.

    spine br0 -- rK == (uplink, shaped) == up0 -- leaf K br0 -- pI == eth0 of host I
"""

from __future__ import annotations

from typing import Dict, List, Optional

from .net import MAX_RACKS, LinkShape, Testbed, TestbedError, run


class RackTestbed(Testbed):
    """R racks of hosts/R hosts each under a spine. IPv4, and with `ipv6`
    IPv6 addresses too (the switches and hosts use them for data); no delay
    lines."""

    def __init__(self, name: str, hosts: int, racks: int, shape: LinkShape,
                 uplink_shape: LinkShape, uplink_shapes: Optional[Dict[int, LinkShape]] = None,
                 mtu: int = 9000, owner_pid: Optional[int] = None, ipv6: bool = False) -> None:
        super().__init__(name, hosts, shape=shape, mtu=mtu, owner_pid=owner_pid, ipv6=ipv6)
        if not 2 <= racks <= MAX_RACKS or hosts % racks != 0:
            raise TestbedError("racks %d must be 2..%d and divide the %d hosts"
                               % (racks, MAX_RACKS, hosts))
        self.racks = racks
        self.uplink_shape = uplink_shape
        self.uplink_shapes = dict(uplink_shapes or {})  # per rack, both directions
        shapes = [shape, uplink_shape] + list(self.uplink_shapes.values())
        for s in shapes:
            s.validate()
        if any(s.delays() for s in shapes):
            raise TestbedError("a testbed of racks has no delay lines: no delay or jitter")

    def leaf_ip(self, k: int) -> str:
        return "198.18.%d.%d" % (self.subnet, 2 + k)

    def leaf_ip6(self, k: int) -> str:
        return "2001:2:0:%x::%x" % (self.subnet, 2 + k)

    def leaf_data_ip(self, k: int) -> str:
        """Leaf k's address for data: IPv6 on an ipv6 instance."""
        return self.leaf_ip6(k) if self.ipv6 else self.leaf_ip(k)

    def rack_of(self, i: int) -> int:
        return i // (self.hosts // self.racks)

    def port_ns(self, i: int) -> str:
        return self.leaf_ns(self.rack_of(i))

    def _more_neighbours(self) -> List[tuple]:
        out = [(self.leaf_ns(k), "br0", self.leaf_ip(k)) for k in range(self.racks)]
        if self.ipv6:
            out += [(self.leaf_ns(k), "br0", self.leaf_ip6(k)) for k in range(self.racks)]
        return out

    @staticmethod
    def _bridge(ns: str, ip: str, mtu: int, ip6: Optional[str] = None) -> None:
        """A namespace with a bridge br0 holding `ip` (and `ip6`)."""
        run(["ip", "netns", "add", ns])
        v6 = [["ip", "-6", "addr", "add", ip6 + "/64", "dev", "br0", "nodad"]] if ip6 else []
        for argv in [["ip", "link", "set", "lo", "up"],
                     ["ip", "link", "add", "br0", "type", "bridge"],
                     ["ip", "link", "set", "br0", "mtu", str(mtu)],
                     ["ip", "addr", "add", ip + "/24", "dev", "br0"]] + v6 + [
                     ["ip", "link", "set", "br0", "up"]]:
            run(["ip", "netns", "exec", ns] + argv)

    def _build(self) -> None:
        mtu = str(self.mtu)
        self._bridge(self.switch_ns, self.switch_ip, self.mtu,
                     self.switch_ip6 if self.ipv6 else None)
        self.netem = self._probe_netem()
        for k in range(self.racks):
            leaf = self.leaf_ns(k)
            self._bridge(leaf, self.leaf_ip(k), self.mtu, self.leaf_ip6(k) if self.ipv6 else None)
            self.sw_exec(["ip", "link", "add", "r%d" % k, "mtu", mtu, "type", "veth", "peer",
                          "name", "up0", "mtu", mtu, "netns", leaf])
            self.sw_exec(["ip", "link", "set", "r%d" % k, "master", "br0"])
            self.sw_exec(["ip", "link", "set", "r%d" % k, "up"])
            run(["ip", "netns", "exec", leaf, "ip", "link", "set", "up0", "master", "br0"])
            run(["ip", "netns", "exec", leaf, "ip", "link", "set", "up0", "up"])
            shape = self.uplink_shapes.get(k, self.uplink_shape)
            self._shape(leaf, "up0", shape)
            self._shape(self.switch_ns, "r%d" % k, shape)
        for i in range(self.hosts):
            h, leaf = self.host_ns(i), self.port_ns(i)
            run(["ip", "netns", "add", h])
            run(["ip", "netns", "exec", h, "ip", "link", "set", "lo", "up"])
            run(["ip", "netns", "exec", leaf, "ip", "link", "add", "p%d" % i, "mtu", mtu, "type",
                 "veth", "peer", "name", "eth0", "mtu", mtu, "netns", h])
            for argv in (["ip", "link", "set", "p%d" % i, "master", "br0"],
                         ["ip", "link", "set", "p%d" % i, "up"]):
                run(["ip", "netns", "exec", leaf] + argv)
            v6 = ([["ip", "-6", "addr", "add", self.host_ip6(i) + "/64", "dev", "eth0", "nodad"]]
                  if self.ipv6 else [])
            for argv in [["ip", "addr", "add", self.host_ip(i) + "/24", "dev", "eth0"]] + v6 + [
                         ["ip", "link", "set", "eth0", "up"]]:
                run(["ip", "netns", "exec", h] + argv)
            self._shape(h, "eth0", self.shape_of(i, "up"))
            self._shape(leaf, "p%d" % i, self.shape_of(i, "down"))
        self._static_neighbours()
