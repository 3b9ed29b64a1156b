"""OLAF across the namespace testbed (scripts/testbed.py olaf): the PS on
host 0, workers on hosts 1..3, inca-switchd in the switch namespace, the
bottleneck toward the PS either the switch's paced egress or a tbf-shaped
link. Needs root (CI runs as root). About 45 s of CI time."""
import json
import os
import subprocess
import sys
import tempfile

from conftest import HERE

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
TESTBED = os.path.join(ROOT, "scripts", "testbed.py")

# 6 workers (2 at a 5 ms cycle, 4 at 15 ms: ~38 Mbit/s of updates offered)
# against 8 Mbit/s, as tests/integration/olaf_train_integration_test.cc on
# loopback.
LOAD = ["--olaf-train-arg=--fast-clusters=1", "--olaf-train-arg=--cycle-ms=5",
        "--olaf-train-arg=--eval-episodes=2"]


def run_olaf(tag, bottleneck, program, extra=()):
    out = tempfile.mkdtemp(prefix="olaf-tb-%s-" % tag)
    name = "%s%d" % (tag, os.getpid() % 100000)
    r = subprocess.run([sys.executable, TESTBED, "olaf", "--name", name, "--hosts", "3",
                        "--bottleneck", bottleneck, "--rate", "8mbit", "--program", program,
                        "--clusters", "3", "--workers-per-cluster", "2", "--duration", "5",
                        "--out", out] + LOAD + list(extra),
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr + r.stdout
    res = json.loads(r.stdout.strip().splitlines()[-1])
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "inca-%s-" % name not in ns  # torn down
    return res, out


def test_switch_bottleneck_across_hosts_fifo_loses_olaf_merges():
    fifo, fifo_dir = run_olaf("of", "switch", "fifo")
    olaf, olaf_dir = run_olaf("oo", "switch", "olaf")
    for res, d in ((fifo, fifo_dir), (olaf, olaf_dir)):
        s = res["summary"]
        assert s["failures"] == 0 and s["workers"] == 6
        assert s["sent"] > 500 and s["ps_updates"] > 100 and s["models_received"] > 0
        # The PS ran in host 0's namespace, on its testbed address.
        with open(os.path.join(d, "ps.log")) as f:
            assert "ps listening 198.18." in f.read()
        for c in range(3):
            for w in range(2):
                with open(os.path.join(d, "worker-%d-%d.json" % (c, w))) as f:
                    assert json.load(f)["models_adopted"] > 0
        # The updates crossed the PS's link: at least what the PS applied.
        assert res["ps_rx_bytes"] > s["ps_updates"] * 1000
    # The paced egress is the bottleneck: FIFO tail-drops, OLAF merges.
    assert fifo["summary"]["loss"] > 0.3
    assert olaf["summary"]["loss"] < 0.1


def test_link_bottleneck_the_kernel_queue_drops_what_olaf_cannot_merge():
    res, _ = run_olaf("ol", "link", "olaf")
    s = res["summary"]
    assert s["failures"] == 0 and s["ps_updates"] > 50
    # The switch is unpaced: the excess is dropped by the shaped link's
    # queue (tbf, FIFO tail drop), not merged.
    assert res["ps_link_queue_drops"] > 100
    assert s["loss"] > 0.3
