"""Every relative link in README.md and docs/ points at a file that exists and, with a
#fragment into a Markdown file, at a heading there (GitHub's anchors)."""
import os
import re

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def _markdown_files():
    yield os.path.join(ROOT, "README.md")
    for base, dirs, files in os.walk(os.path.join(ROOT, "docs")):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            if f.endswith(".md"):
                yield os.path.join(base, f)


def _prose(path):
    """The file's lines outside fenced code blocks."""
    inside = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line.lstrip()):
                inside = not inside
                continue
            if not inside:
                yield n, line


def anchor(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    h = re.sub(r"`|\*\*|\*", "", heading.strip().lower())
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for _, line in _prose(path):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        a = anchor(m.group(1))
        k = seen.get(a, 0)
        seen[a] = k + 1
        out.add(a if k == 0 else "%s-%d" % (a, k))
    for m in re.finditer(r'<a (?:name|id)="([^"]+)"', open(path, encoding="utf-8").read()):
        out.add(m.group(1))
    return out


def test_anchor_follows_githubs_rule():
    assert anchor("R\\* before and after issue 16 (`scripts/testbed.py perf`, two builds)") == \
        "r-before-and-after-issue-16-scriptstestbedpy-perf-two-builds"
    assert anchor("Looking at packets (the write-up's 5.1)") == "looking-at-packets-the-write-ups-51"


def test_every_relative_link_resolves():
    broken = []
    cache = {}
    for path in _markdown_files():
        for n, line in _prose(path):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue  # http:, https:, mailto:
                file_part, _, frag = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                    if file_part else path
                where = "%s:%d: %s" % (os.path.relpath(path, ROOT), n, target)
                if not os.path.exists(dest):
                    broken.append(where + " (no such file)")
                    continue
                if frag and dest.endswith(".md"):
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if frag not in cache[dest]:
                        broken.append(where + " (no such heading)")
    assert broken == [], "\n".join(broken)
