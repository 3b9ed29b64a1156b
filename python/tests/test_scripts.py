"""The quick-start scripts: help comes before any set-up (issue 18)."""
import os
import shutil
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def test_run_sh_help_prints_usage_without_building(tmp_path):
    # run.sh alone in a tree without setup.sh: any attempt to build fails.
    (tmp_path / "scripts").mkdir()
    shutil.copy(os.path.join(ROOT, "scripts", "run.sh"), tmp_path / "scripts" / "run.sh")
    for flag in ("--help", "-h"):
        out = subprocess.run(["bash", str(tmp_path / "scripts" / "run.sh"), "--ranks", "8", flag],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("usage: scripts/run.sh")
        assert "cais-perf" in out.stdout
        assert not (tmp_path / "build").exists()


def test_a_hung_rank_is_reported_with_its_python_stack(tmp_path):
    # run_ranks aborts ranks past their deadline; the report shows where each one was stuck.
    import pytest
    import cais.launch as launch
    script = tmp_path / "stuck.py"
    script.write_text("import os, threading\n"
                      "def wait_for_peer():\n"
                      "    threading.Event().wait()  # never set: hung\n"
                      "if os.environ['RANK'] == '1':\n"
                      "    wait_for_peer()\n"
                      "print('{}')\n")
    with pytest.raises(RuntimeError) as err:
        launch.run_ranks([str(script)], 2, timeout_s=3)
    report = str(err.value)
    assert "--- rank 0 rc=0" in report
    rank1 = report.split("--- rank 1")[1]
    assert "timed out after 3 s" in rank1 and "in wait_for_peer" in rank1
