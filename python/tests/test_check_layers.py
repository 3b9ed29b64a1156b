"""scripts/check_layers.py (scripts/check-code.sh layers) on small trees
of its own: each rule fires on what it forbids and stays quiet otherwise."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "scripts", "check_layers.py")


def run_on(files):
    with tempfile.TemporaryDirectory() as d:
        for path, text in files.items():
            full = os.path.join(d, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)
        subprocess.run(["git", "init", "-q", d], check=True)
        subprocess.run(["git", "-C", d, "add", "-A"], check=True)
        return subprocess.run([sys.executable, CHECK], cwd=d, capture_output=True, text=True)


def test_a_clean_tree_passes():
    r = run_on({"src/a/x.cc": '#include "b/y.h"\n', "src/b/y.h": "\n",
                "scripts/m.py": "import n\n", "scripts/n.py": "X = 1\n"})
    assert r.returncode == 0, r.stdout
    assert "0 layering findings" in r.stdout


def test_an_include_cycle_between_folders_fails_naming_both_edges():
    r = run_on({"src/a/x.cc": '#include "b/y.h"\n',
                "src/b/y.h": '#include "inca/a/z.h"\n', "include/inca/a/z.h": "\n"})
    assert r.returncode == 1
    assert "include cycle between src/ folders a b" in r.stdout
    assert "src/a/x.cc includes b/y.h" in r.stdout
    assert "src/b/y.h includes inca/a/z.h" in r.stdout


def test_a_python_import_cycle_fails():
    r = run_on({"scripts/m.py": "import n\n", "scripts/n.py": "from m import X\n"})
    assert r.returncode == 1
    assert "Python import cycle in scripts/: m n" in r.stdout


def test_private_names_of_another_module_fail_by_import_and_by_attribute():
    r = run_on({"scripts/m.py": "from n import _hidden\nimport n\nn._other()\n",
                "scripts/n.py": "def _hidden(): pass\ndef _other(): pass\n"})
    assert r.returncode == 1
    assert "scripts/m.py imports _hidden from n" in r.stdout
    assert "scripts/m.py uses n._other" in r.stdout
