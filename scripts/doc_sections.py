"""Sections of a generated document that belong to other generators:
`<!-- NAME:begin -->` ... `<!-- NAME:end -->`. Each script rewrites only
its own (docs/EVALUATION.md: the OLAF part, drl, cais-testbed)."""
import argparse
import json
import os
import re
import sys
from typing import Dict, List, Optional


def marked(text: str) -> Dict[str, str]:
    """Every marked section of `text`, markers included, by name."""
    out = {}
    for m in re.finditer(r"<!-- ([a-z0-9-]+):begin -->.*?<!-- \1:end -->", text, re.S):
        out[m.group(1)] = m.group(0)
    return out


def replace_section(path: str, name: str, body: str) -> None:
    """Puts `body` (without markers) as section `name` of the file at
    `path`, in place of the old one or appended at the end."""
    begin, end = "<!-- %s:begin -->" % name, "<!-- %s:end -->" % name
    section = "%s\n%s\n%s" % (begin, body.rstrip("\n"), end)
    with open(path) as f:
        text = f.read()
    old = marked(text).get(name)
    text = text.replace(old, section) if old else text.rstrip("\n") + "\n\n" + section + "\n"
    with open(path, "w") as f:
        f.write(text)


def sim_runs(directory: str, names: List[str], prog: str) -> Optional[Dict[str, dict]]:
    """inca-sim's result (`<directory>/<name>.json`) of each run by name; None
    after one line on stderr, naming the run, if one cannot be read."""
    runs = {}
    for name in names:
        try:
            with open(os.path.join(directory, name + ".json")) as f:
                runs[name] = json.load(f)
        except (OSError, ValueError) as e:
            print("%s: %s: %s" % (prog, name, e), file=sys.stderr)
            return None
    return runs


def evaluation_args(description: str, root: str) -> argparse.ArgumentParser:
    """An evaluation script's options: --dir (inca-sim's --out) and --doc."""
    ap = argparse.ArgumentParser(description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="inca-sim's --out directory")
    ap.add_argument("--doc", default=os.path.join(root, "docs", "EVALUATION.md"))
    return ap


def pyplot():
    """matplotlib.pyplot drawing to files (the Agg backend; Debian's
    python3-matplotlib). ImportError when matplotlib is not installed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt
