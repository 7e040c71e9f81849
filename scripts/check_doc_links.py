#!/usr/bin/env python3
"""Fails on a relative link in the user docs that points nowhere.

Checks README.md, ARCHITECTURE.md and docs/*.md (or the files given): every inline markdown link
`[text](target)` that is not a URL must name an existing file or folder, relative to the file that
links it; a `#fragment` into a markdown file must name one of its headings (GitHub's anchors:
lowercase, punctuation dropped, spaces to hyphens). Links inside fenced code blocks are skipped.

Usage: check_doc_links.py [ROOT] [FILE...]   exit 0 clean, 1 with one line per broken link.
"""
import glob
import os
import re
import sys

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...


def lines_outside_fences(text):
    fenced = False
    for number, line in enumerate(text.split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # keeps letters, digits, _, -, spaces
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen = {}
        found = set()
        with open(path, encoding="utf-8") as f:
            for _, line in lines_outside_fences(f.read()):
                m = HEADING.match(line)
                if not m:
                    continue
                base = slug(m.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def check(path, root):
    problems = []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for number, line in lines_outside_fences(text):
        for m in LINK.finditer(line):
            target = m.group(1)
            if EXTERNAL.match(target):
                continue
            file_part, _, fragment = target.partition("#")
            where = f"{os.path.relpath(path, root)}:{number}"
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                problems.append(f"{where}: link to {target}: {os.path.relpath(dest, root)} does not exist")
                continue
            if fragment and dest.endswith(".md") and os.path.isfile(dest) and fragment not in anchors(dest):
                problems.append(f"{where}: link to {target}: no heading with anchor #{fragment} in "
                                f"{os.path.relpath(dest, root)}")
    return problems


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    files = [os.path.abspath(f) for f in argv[2:]]
    if not files:
        files = [os.path.join(root, name) for name in ("README.md", "ARCHITECTURE.md")]
        files += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    problems = []
    links = 0
    for path in files:
        if not os.path.isfile(path):
            print(f"doc links: {path}: no such file")
            return 1
        problems += check(path, root)
        with open(path, encoding="utf-8") as f:
            links += sum(len(LINK.findall(line)) for _, line in lines_outside_fences(f.read()))
    for p in problems:
        print("doc links: " + p)
    if problems:
        print(f"doc links: {len(problems)} broken link(s) in {len(files)} file(s)")
        return 1
    print(f"doc links: {len(files)} files, {links} links, none broken")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
