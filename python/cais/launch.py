"""Local orchestration for tests, examples and benchmarks: start inca-switchd on
loopback and spawn rank processes the way torchrun would (RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT). Loopback only; every wait is bounded."""

from __future__ import annotations

import json
import random
import os
import re
import signal
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence

PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def build_dir() -> str:
    d = os.environ.get("INCA_BUILD_DIR")
    if d:
        return os.path.abspath(d)
    here = os.path.dirname(os.path.abspath(__file__))
    # build/<preset>/python/cais/launch.py (linked) or python/cais/launch.py
    for cand in (os.path.join(here, "..", ".."), os.path.join(here, "..", "..", "build", "release")):
        if os.path.exists(os.path.join(cand, "bin", "inca-switchd")):
            return os.path.abspath(cand)
    return os.path.abspath(os.path.join(here, "..", "..", "build", "release"))


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port on 127.0.0.1 that was free a moment ago.

    Chosen below the kernel's ephemeral range, as launch::FreeLoopbackPort
    does: a port from bind(0) could be handed to any socket opened elsewhere
    (connect(), an unbound sendto()) before the caller binds it."""
    high = _ephemeral_low()
    low = max(1024, high - 12000)
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200 if high - low > 100 else 0):
        port = rng.randrange(low, high)
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dies_with_us(argv: Sequence[str], sig: str) -> List[str]:
    """`argv`, run so that the kernel sends it `sig` (TERM, KILL) when this process dies,
    however it dies (SIGKILL included): through util-linux's setpriv, which sets
    PR_SET_PDEATHSIG and execs in place (so does `ip netns exec` after it). A preexec_fn
    would do the same but can deadlock a parent with threads (torch's). Without setpriv,
    `argv` as it is."""
    setpriv = shutil.which("setpriv")
    return ([setpriv, "--pdeathsig", sig, "--"] if setpriv else []) + list(argv)


def hostport(host: str, port: int) -> str:
    """host:port, an IPv6 address in brackets."""
    return ("[%s]:%d" if ":" in host else "%s:%d") % (host, port)


class Switch:
    """inca-switchd on loopback with free ports; stop() (or `with`) ends it.
    host/wrap run it elsewhere, e.g. in a testbed's switch namespace:
    Switch(host=tb.switch_ip, wrap=["ip", "netns", "exec", tb.switch_ns]).
    host may be an IPv6 address; data_port fixes the data port (switches that
    name each other in their configurations), control_port the control API's
    (a switch restarted where a topology names it)."""

    def __init__(self, extra: Sequence[str] = (), offload_controller: str = "off",
                 timeout_ms: float = 5000, binary: Optional[str] = None,
                 host: str = "127.0.0.1", wrap: Sequence[str] = (),
                 data_port: Optional[int] = None, control_port: int = 0) -> None:
        self.binary = binary or os.path.join(build_dir(), "bin", "inca-switchd")
        if not os.path.exists(self.binary):
            raise FileNotFoundError("%s not found: build it with `ninja -C build/release "
                                    "inca-switchd` or set INCA_BUILD_DIR" % self.binary)
        # A port free here; in another namespace every port is free.
        self.data_addr = hostport(host, data_port or free_port(socket.SOCK_DGRAM))
        self.host = host
        self.log = tempfile.NamedTemporaryFile(prefix="inca-switchd-", suffix=".log", delete=False)
        args = [self.binary, "--listen", self.data_addr, "--control-listen",
                hostport(host, control_port),
                "--http-listen", "off", "--offload-controller", offload_controller,
                "--timeout-ms", str(timeout_ms), "--log-level", "info"] + list(extra)
        self.proc = subprocess.Popen(dies_with_us(list(wrap) + args, "TERM"), stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.control_addr = self._wait_ready(10.0)

    def _wait_ready(self, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        port = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("inca-switchd exited with %s:\n%s" % (self.proc.returncode,
                                                                         self.output()))
            text = self.output()
            m = re.search(r"event=control_listening port=(\d+)", text)
            if m:
                port = int(m.group(1))
            # The CAIS program says switch_started, OLAF and FIFO olaf_switch_started.
            if port and re.search(r"event=(olaf_)?switch_started", text):
                return hostport(self.host, port)
            time.sleep(0.05)
        text = self.output()
        self.stop()
        raise TimeoutError("inca-switchd did not start within %.0f s:\n%s" % (timeout_s, text))

    def output(self) -> str:
        with open(self.log.name, "r", errors="replace") as f:
            return f.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        try:
            os.unlink(self.log.name)
        except OSError:
            pass

    def __enter__(self) -> "Switch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_ranks(argv: Sequence[str], world_size: int, env: Optional[Dict[str, str]] = None,
              timeout_s: float = 120.0, wrap: Optional[Callable[[int], List[str]]] = None,
              rank_env: Optional[Callable[[int], Dict[str, str]]] = None) -> List[dict]:
    """Runs `python argv...` as ranks 0..world_size-1 and returns each rank's last stdout
    line parsed as JSON. Raises with every rank's output if one fails or times out.
    wrap(r): a command prefix for rank r (e.g. `ip netns exec NS`); rank_env(r):
    variables for rank r only (e.g. INCA_BIND_IP)."""
    master_port = free_port()
    base = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    base["PYTHONPATH"] = pkg_parent + os.pathsep + base.get("PYTHONPATH", "")
    base.update({"WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1",
                 "MASTER_PORT": str(master_port), "OMP_NUM_THREADS": "1",
                 "GLOO_SOCKET_IFNAME": base.get("GLOO_SOCKET_IFNAME", "lo"),
                 "PYTHONFAULTHANDLER": "1"})
    if env:
        base.update(env)
    procs = []
    for r in range(world_size):
        e = dict(base, RANK=str(r), LOCAL_RANK=str(r))
        if rank_env:
            e.update(rank_env(r))
        prefix = wrap(r) if wrap else []
        procs.append(subprocess.Popen(dies_with_us(prefix + [PYTHON] + list(argv), "KILL"), env=e,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    deadline = time.monotonic() + timeout_s
    outs = []
    failed = False
    for p in procs:
        try:
            o, e = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            # SIGABRT first: with PYTHONFAULTHANDLER set, every hung rank prints
            # all its threads' Python stacks to stderr before it dies.
            for q in procs:
                if q.poll() is None:
                    q.send_signal(signal.SIGABRT)
            try:
                o, e = p.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                o, e = p.communicate()
            e += "\n[timed out after %.0f s]" % timeout_s
            failed = True
        outs.append((p.returncode, o, e))
        failed = failed or p.returncode != 0
    if failed:
        for q in procs:
            if q.poll() is None:
                q.kill()
        report = "\n".join("--- rank %d rc=%s\nstdout:\n%s\nstderr:\n%s" % (i, rc, o[-3000:],
                                                                           e[-3000:])
                           for i, (rc, o, e) in enumerate(outs))
        raise RuntimeError("rank processes failed:\n" + report)
    results = []
    for rc, o, e in outs:
        lines = [l for l in o.strip().splitlines() if l.startswith("{")]
        results.append(json.loads(lines[-1]) if lines else {})
    return results
