#!/usr/bin/env python3
"""The layering checks of scripts/check-code.sh ("layers"):

  1. no include cycle between src/ folders: folder A includes folder B when
     a file under src/A or include/inca/A (which mirrors src/A) includes
     "B/..." or "inca/B/..."; the folders' graph must have no cycle;
  2. no import cycle between the Python modules of one directory
     (scripts/, python/tests/, python/examples/..., python/cais/);
  3. no import of another module's private names (`from m import _x`, or
     `m._x` after `import m`), between modules of this repository.

Prints each finding and exits 1 when there is any.
"""
import ast
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def tracked(*patterns):
    out = subprocess.run(["git", "ls-files", *patterns], capture_output=True, text=True,
                         check=True).stdout
    return [p for p in out.split() if os.path.exists(p)]


def cycles(graph):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def folder_cycles():
    if not os.path.isdir("src"):
        return []
    folders = {d for d in os.listdir("src") if os.path.isdir(os.path.join("src", d))}
    graph, why = {}, {}
    for path in tracked("src/*.cc", "src/*.h", "include/inca/*.h"):
        a = path.split("/")[2 if path.startswith("include/") else 1]
        if a not in folders:
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        for inc in INCLUDE.findall(text):
            parts = inc.split("/")
            b = parts[1] if parts[0] == "inca" and len(parts) > 2 else parts[0]
            if b in folders and b != a and len(parts) > 1:
                graph.setdefault(a, set()).add(b)
                why.setdefault((a, b), "%s includes %s" % (path, inc))
    found = []
    for comp in cycles(graph):
        edges = ["    " + why[(a, b)] for a in comp for b in comp if (a, b) in why]
        found.append("include cycle between src/ folders %s:\n%s" % (" ".join(comp),
                                                                     "\n".join(edges)))
    return found


def local_imports(path, names):
    """(module imported, private names taken) for each import of a sibling."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    imported, private = set(), []
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[-1]
                if top in names:
                    imported.add(top)
                    aliases[a.asname or a.name] = top
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and not node.module:
            for a in node.names:  # from . import sibling
                if a.name in names:
                    imported.add(a.name)
                    aliases[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.level <= 1 and node.module:
            top = node.module.split(".")[-1]
            if top in names:
                imported.add(top)
                private += ["%s imports %s from %s" % (path, a.name, top) for a in node.names
                            if a.name.startswith("_") and not a.name.startswith("__")]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and
                node.value.id in aliases and node.attr.startswith("_") and
                not node.attr.startswith("__")):
            private.append("%s uses %s.%s" % (path, aliases[node.value.id], node.attr))
    return imported, private


def python_findings():
    by_dir = {}
    for path in tracked("*.py"):
        by_dir.setdefault(os.path.dirname(path), []).append(path)
    found = []
    for d, paths in sorted(by_dir.items()):
        names = {os.path.splitext(os.path.basename(p))[0]: p for p in paths}
        names.pop("__init__", None)
        graph = {}
        for p in paths:
            me = os.path.splitext(os.path.basename(p))[0]
            imported, private = local_imports(p, set(names) - {me})
            graph[me] = imported
            found += sorted(set(private))
        for comp in cycles(graph):
            found.append("Python import cycle in %s/: %s" % (d or ".", " ".join(comp)))
    return found


def main():
    found = folder_cycles() + python_findings()
    for f in found:
        print(f)
    print("check-code: %d layering findings (include cycles, import cycles, private imports)" %
          len(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
