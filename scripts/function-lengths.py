#!/usr/bin/env python3
"""function-lengths.py — the longest functions of the product's C++ sources, in lines.

A function is a definition that starts at column 0 (this codebase does not indent namespace
contents) and ends at the first line that is a lone "}" at column 0; lambdas and local classes count
toward the function that holds them, methods defined inside a class body are left out. Tests,
benchmarks and generated files are not the product and are not read.

  scripts/function-lengths.py [--top N] [--over LINES] [DIR...]      (default: the product's folders)

Prints "LINES  FILE:LINE  NAME", longest first; with --over, exits 1 when a function is longer.
"""
import argparse
import os
import re
import sys

PRODUCT = ["format", "probe", "trainer", "importers", "analyzers", "gather", "reports", "tools"]
KEYWORD = re.compile(r"^(namespace|struct|class|enum|union|extern|static_assert|using|typedef|return|if|for|while|switch)\b")
SIGNATURE_START = re.compile(r"^[A-Za-z_~]")


def functions(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if (SIGNATURE_START.match(line) and "(" in line and not line.rstrip().endswith(";")
                and not KEYWORD.match(line) and "=" not in line.split("(")[0]):
            # the signature may span lines, up to the one that opens the body
            body = None
            for j in range(i, min(i + 8, len(lines))):
                text = lines[j].rstrip()
                if text.endswith((";", "}")):  # a declaration, or a body on one line
                    break
                if text.endswith("{"):
                    body = j
                    break
            if body is not None:
                end = body + 1
                while end < len(lines) and lines[end] != "}" and not lines[end].startswith("}  //") and lines[end] != "};":
                    end += 1
                words = line.split("(")[0].split()
                yield end - i + 1, i + 1, words[-1] if words else line[:40]
                i = end
        i += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--over", type=int)
    args = ap.parse_args()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    dirs = args.dirs or [os.path.join(root, d) for d in PRODUCT]
    found = []
    for d in dirs:
        for base, _, files in os.walk(d):
            for n in files:
                if n.endswith((".cpp", ".cc", ".cu", ".h", ".hpp", ".cuh")):
                    p = os.path.join(base, n)
                    for length, line, name in functions(p):
                        found.append((length, os.path.relpath(p, root), line, name))
    found.sort(key=lambda f: -f[0])
    for length, path, line, name in found[:args.top]:
        print(f"{length:5d}  {path}:{line}  {name}")
    if args.over is not None:
        longer = [f for f in found if f[0] > args.over]
        print(f"{len(longer)} function(s) over {args.over} lines")
        return 1 if longer else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
