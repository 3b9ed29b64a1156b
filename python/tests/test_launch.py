"""cais.launch: what it starts dies with the process that started it (issue 46), however
that process dies (SIGKILL included)."""
import os
import subprocess
import sys
import time

from cais import launch


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _launcher(code):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(launch.__file__)))
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)


def _gone_within(pid, seconds):
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)  # a bounded poll of /proc, not a wait for a guessed time
    return not _alive(pid)


def test_a_switch_dies_with_the_process_that_launched_it():
    p = _launcher("import sys, cais.launch as l\n"
                  "s = l.Switch()\nprint(s.proc.pid, flush=True)\nsys.stdin.read()")
    pid = int(p.stdout.readline())
    assert _alive(pid)
    p.kill()
    p.wait()
    assert _gone_within(pid, 10), "inca-switchd %d outlived its launcher" % pid


def test_ranks_die_with_the_process_that_launched_them(tmp_path):
    # A rank that would wait an hour writes its pid; its launcher is killed.
    pidfile = tmp_path / "rank.pid"
    rank = ("import os, time\n"
            "open(%r, 'w').write(str(os.getpid()))\n"
            "time.sleep(3600)" % str(pidfile))
    p = _launcher("import cais.launch as l\nl.run_ranks(['-c', %r], 1, timeout_s=3600)" % rank)
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.01)  # bounded: until the rank has started
    pid = int(pidfile.read_text())
    assert _alive(pid)
    p.kill()
    p.wait()
    assert _gone_within(pid, 10), "rank %d outlived its launcher" % pid
