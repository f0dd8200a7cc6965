#!/usr/bin/env python3
"""The joints of autoperf's core, measured: which files import which, the
pairs of files that import each other, the imports that run from a lower
layer to a higher one (the order crates/core/src/lib.rs states), the files
over 600 lines, and how many items the core makes public.

    python3 scripts/seams.py            # the summary
    python3 scripts/seams.py --edges    # and every file-to-file import

A file's imports are the `crate::…`, `super::…` and `self::…` paths it
names (in `use` declarations or inline), each resolved to the longest
module that is a file. `mod x;` declarations, and a module's paths into
its own children (a facade re-exporting them), are not imports. Test-only
code (`#[cfg(test)] mod tests { … }` at the end of a file, `tests.rs`
files) is left out: tests may reach anywhere.
"""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CORE = os.path.join(ROOT, "crates", "core", "src")

# lib.rs's layering sentence, lowest first; modules on one line share a
# layer. Kept here as the lib.rs comment says it.
LAYERS = [
    ["scenario", "load"],
    ["measure"],
    ["protocol"],
    ["engine"],
    ["capacity"],
    ["record"],
    ["profile"],
    ["model"],
    ["thresholds", "results", "report", "import"],
    ["compare", "run"],
]
LAYER_OF = {m: i for i, names in enumerate(LAYERS) for m in names}


def module_files():
    """Module path (tuple) -> file, for every .rs file of the core."""
    files = {}
    for dirpath, _, names in os.walk(CORE):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, CORE)[:-3].split(os.sep)
            if rel[-1] in ("mod", "lib"):
                rel = rel[:-1]
            files[tuple(rel)] = path
    return files


def strip_tests(text):
    """The file without its trailing `#[cfg(test)] mod tests { … }`."""
    m = re.search(r"\n#\[cfg\(test\)\]\s*\nmod \w+\s*\{", text)
    return text[: m.start()] if m else text


def paths_in(text):
    """Every path the code names from `crate`, `super` or `self`, expanded
    out of `use` groups."""
    found = []
    for m in re.finditer(r"\buse\s+((?:crate|super|self)(?:::[^;]*))\s*;", text, re.S):
        found.extend(expand(m.group(1)))
    for m in re.finditer(r"\b((?:crate|super)(?:::(?:super|\w+))+)", text):
        found.append(m.group(1))
    return found


def expand(tree):
    """`a::{b, c::{d, e}}` -> a::b, a::c::d, a::c::e."""
    tree = re.sub(r"\s+", "", tree)
    m = re.match(r"^(.*?)::\{(.*)\}$", tree)
    if not m:
        return [re.sub(r"\bas\w+$", "", tree.split(" as ")[0])]
    head, body = m.group(1), m.group(2)
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    out = []
    for part in parts:
        if not part:
            continue
        if part == "self":
            out.append(head)
        else:
            out.extend(expand(head + "::" + part))
    return out


def main():
    files = module_files()
    edges = {}
    for mod, path in files.items():
        if mod and mod[-1] == "tests":
            continue
        text = strip_tests(open(path).read())
        # `super` from module a::b (a/b.rs or a/b/mod.rs) is a.
        here = mod
        targets = set()
        for p in paths_in(text):
            segs = p.split("::")
            if segs[0] == "super":
                base = list(here[:-1])
                segs = segs[1:]
                while segs and segs[0] == "super":
                    base = base[:-1]
                    segs = segs[1:]
                full = base + segs
            elif segs[0] == "self":
                full = list(here) + segs[1:]
            else:
                full = segs[1:]
            target = None
            for n in range(len(full), 0, -1):
                if tuple(full[:n]) in files:
                    target = tuple(full[:n])
                    break
            # A module owns its children: declaring and re-exporting them
            # (`pub use self::http::HttpTransport`) is no dependency.
            owns = target is not None and target[: len(mod)] == mod
            if target is not None and not owns and target != ():
                targets.add(target)
        edges[mod] = targets

    def name(m):
        return "/".join(m) or "lib"

    loops = sorted(
        {tuple(sorted((a, b))) for a, ts in edges.items() for b in ts if a in edges.get(b, ())}
    )
    upward = []
    for a, ts in edges.items():
        for b in ts:
            la, lb = LAYER_OF.get(a[0] if a else ""), LAYER_OF.get(b[0] if b else "")
            if la is not None and lb is not None and lb > la:
                upward.append((a, b))
    big = []
    for root in ("crates", "src"):
        for dirpath, _, names in os.walk(os.path.join(ROOT, root)):
            if "/target" in dirpath or "/tests" in dirpath:
                continue
            for n in names:
                if n.endswith(".rs"):
                    p = os.path.join(dirpath, n)
                    lines = sum(1 for _ in open(p))
                    if lines > 600:
                        big.append((lines, os.path.relpath(p, ROOT)))
    public = 0
    for path in files.values():
        public += len(re.findall(r"^\s*pub (?:fn|struct|enum|mod|const|type|trait|use|static)\b",
                                 strip_tests(open(path).read()), re.M))

    if "--edges" in sys.argv:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f"{name(a)} -> {name(b)}")
        print()
    print(f"files importing each other ({len(loops)}):")
    for a, b in loops:
        print(f"  {name(a)} <-> {name(b)}")
    print(f"imports from a lower layer to a higher one ({len(upward)}):")
    for a, b in sorted(upward):
        print(f"  {name(a)} -> {name(b)}")
    print(f"files over 600 lines ({len(big)}):")
    for lines, p in sorted(big, reverse=True):
        print(f"  {lines:5d} {p}")
    print(f"public items in the core (`pub` fn/struct/enum/mod/const/type/trait/use/static): {public}")


if __name__ == "__main__":
    main()
