#!/usr/bin/env python3
"""Lists the longest C++ function bodies in the library sources, longest first.

Usage: longest_functions.py [-n N] [--all] [ROOT]
  -n N   how many to list (default 10)
  --all  list every function
Prints `lines  file:line  function`, where lines counts the body from its `{` to its `}`
inclusive and file:line is where the function's declaration starts.

Scans the git-tracked *.cpp and *.h files under api/ base/ distributed/ fixtures/ formats/
shards/ verifier/ (not tests/, bench/, fuzz/, examples/). The scanner is a simple brace matcher,
not a parser: it blanks comments, string and character literals and preprocessor lines, then
walks the braces at namespace and class scope and takes a `{` as a function body when the
declaration before it has a parameter list `(...)` followed only by qualifiers (const,
noexcept, override, a trailing return type) or a constructor's member initializers. Lambdas
and local classes count toward the function that holds them.
"""
import argparse
import os
import re
import subprocess
import sys

DIRS = ["api", "base", "distributed", "fixtures", "formats", "shards", "verifier"]
RAW_PREFIX = re.compile(r'(?:u8|u|U|L)?R"([^()\\ ]{0,16})\(')


def blank(text):
    """Returns text with comments, literals and preprocessor lines replaced by spaces (newlines
    kept, so offsets and line numbers stay those of the original)."""
    out = list(text)
    n = len(text)
    i = 0
    line_start = True

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if line_start and c in " \t":
            i += 1
            continue
        if line_start and c == "#":
            j = i
            while j < n:
                if text[j] == "\n" and text[j - 1] != "\\":
                    break
                j += 1
            wipe(i, j)
            i = j
            continue
        line_start = c == "\n"
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            wipe(i, j)
            i = j
            continue
        m = RAW_PREFIX.match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find(")" + m.group(1) + '"', m.end())
            j = n if end < 0 else end + len(m.group(1)) + 2
            wipe(i, j)
            i = j
            continue
        if c == '"' or (c == "'" and not digit_separator(text, i)):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            wipe(i + 1, j - 1)  # keep the quotes so "x" stays a token
            i = j
            continue
        i += 1
    return "".join(out)


def digit_separator(text, i):
    """True when the ' at i sits inside a number such as 1'000'000."""
    j = i - 1
    while j >= 0 and (text[j].isalnum() or text[j] in "_'."):
        j -= 1
    token = text[j + 1:i]
    return bool(token) and token[0].isdigit() and i + 1 < len(text) and text[i + 1].isalnum()


def match_brace(text, i):
    """Index of the } that closes the { at i."""
    depth = 0
    for k in range(i, len(text)):
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(text) - 1


SCOPE = re.compile(r"^\s*(?:template\s*<.*>\s*)?(?:inline\s+)?(namespace|class|struct|union|extern)\b",
                   re.S)
ENUM = re.compile(r"^\s*enum\b")
QUALIFIERS = re.compile(
    r"^(?:\s|const|volatile|noexcept(?:\s*\([^()]*\))?|override|final|mutable|&&?|"
    r"->\s*[\w:<>,\s*&]+|=\s*default)*$")
NAME = re.compile(r"((?:[\w~]+\s*(?:<[^()]*>)?\s*::\s*)*(?:operator\s*[^\s(]+|operator\s*\(\s*\)|[\w~]+))\s*$")


def top_level_paren(decl):
    """(first '(' index, index just after its ')') at paren depth 0, or None."""
    first = decl.find("(")
    if first < 0:
        return None
    depth = 0
    for k in range(first, len(decl)):
        if decl[k] == "(":
            depth += 1
        elif decl[k] == ")":
            depth -= 1
            if depth == 0:
                return first, k + 1
    return None


def is_function(decl):
    """decl: the text of a declaration up to (not including) a `{` at scope level."""
    head = decl.split("(", 1)[0]
    if re.search(r"(?<![<>!=])=(?!=)", head) and "operator" not in head:
        return False  # an initializer: `auto x = ...{`, `T kTable = {`
    span = top_level_paren(decl)
    if span is None:
        return False
    # operator()(...) has an empty first pair: the parameter list is the second one.
    if re.search(r"operator\s*$", decl[:span[0]]):
        rest = top_level_paren(decl[span[1]:])
        if rest is None:
            return False
        span = (span[0], span[1] + rest[1])
    tail = decl[span[1]:]
    if QUALIFIERS.match(tail):
        return True
    # A constructor's member initializers: `) : a_(x), b_{y}`.
    return bool(re.match(r"^\s*(?:const\s*)?(?:noexcept\s*)?:(?!:)", tail))


def function_name(decl):
    span = top_level_paren(decl)
    before = decl[:span[0]]
    if re.search(r"operator\s*$", before):
        before = decl[:span[0]] + "()"
    m = NAME.search(before)
    name = m.group(1) if m else before.strip().split()[-1]
    return re.sub(r"\s+", "", name)


def scan(text):
    """Yields (start offset of the declaration, body { offset, body } offset, name)."""
    clean = blank(text)

    def walk(i, end):
        decl_start = i
        while i < end:
            c = clean[i]
            if c in ";":
                decl_start = i + 1
            elif c == "}":
                decl_start = i + 1
            elif c == "{":
                decl = clean[decl_start:i]
                close = match_brace(clean, i)
                if SCOPE.match(decl) and "(" not in decl.split("{")[0].split("=")[0]:
                    yield from walk(i + 1, close)
                    decl_start = close + 1
                elif ENUM.match(decl):
                    decl_start = close + 1
                elif is_function(decl):
                    yield decl_start, i, close, function_name(decl)
                    decl_start = close + 1
                # Otherwise a braced initializer (`T x{...}`, `= {...}`, or a member's `b_{y}` in
                # a constructor's initializer list): the declaration goes on past it.
                i = close
            i += 1

    yield from walk(0, len(clean))


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def tracked_sources(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "--"] + DIRS, check=True,
                             capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = []
        for top in DIRS:
            for dirpath, _, files in os.walk(os.path.join(root, top)):
                out += [os.path.relpath(os.path.join(dirpath, f), root) for f in files]
    return sorted(p for p in out if p.endswith((".cpp", ".h")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=10)
    ap.add_argument("--all", action="store_true")
    ap.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."))
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    found = []
    for rel in tracked_sources(root):
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for start, body, close, name in scan(text):
            lines = line_of(text, close) - line_of(text, body) + 1
            first = start + len(text[start:body]) - len(text[start:body].lstrip())
            found.append((lines, f"{rel}:{line_of(text, first)}", name))
    found.sort(key=lambda f: (-f[0], f[1]))
    for lines, where, name in found if args.all else found[:args.n]:
        print(f"{lines:5d}  {where}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
