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
