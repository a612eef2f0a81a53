#!/usr/bin/env python3
"""No import circles between files: within each crate, a file (module) that names
another through `crate::` or `super::` depends on it, and these dependencies must not
form a cycle (lib.rs and main.rs, which only declare and re-export, are left out; so are
`#[cfg(test)]` modules, which may look anywhere). Prints each cycle found and exits 1."""
import pathlib, re, sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

def strip_tests(text):
    # Drop `#[cfg(test)] mod tests { ... }` (to the end of the file: tests come last here).
    m = re.search(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", text)
    return text[: m.start()] if m else text

def strip_comments(text):
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)

def modules(src):
    """Map module path (tuple) -> file, for every .rs under src but lib.rs/main.rs."""
    mods = {}
    for f in src.rglob("*.rs"):
        rel = f.relative_to(src).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "mod":
            parts = parts[:-1]
        if parts in (["lib"], ["main"]) or not parts:
            continue
        mods[tuple(parts)] = f
    return mods

def deps(mod, text, mods):
    found = set()
    for m in re.finditer(r"\b(crate|super)((?:::\w+)+)", text):
        base = [] if m.group(1) == "crate" else list(mod[:-1])
        path = base + m.group(2).split("::")[1:]
        # The longest prefix that is a module file.
        for n in range(len(path), 0, -1):
            key = tuple(path[:n])
            if key in mods:
                if key != mod and not (len(key) < len(mod) and mod[: len(key)] == key):
                    found.add(key)
                break
    # `use crate::{a, b::c}` groups.
    for m in re.finditer(r"use\s+crate::\{([^;]*)\};", text, flags=re.S):
        for item in re.findall(r"(\w+)(?:::|\s*[,}]|\s*$)", m.group(1) + ","):
            key = (item,)
            if key in mods and key != mod:
                found.add(key)
    return found

def cycles(graph):
    out, color, stack = [], {}, []
    def visit(n):
        color[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if color.get(d) == 1:
                out.append(stack[stack.index(d):] + [d])
            elif not color.get(d):
                visit(d)
        stack.pop()
        color[n] = 2
    for n in sorted(graph):
        if not color.get(n):
            visit(n)
    return out

bad = 0
for crate in sorted((ROOT / "crates").iterdir()):
    src = crate / "src"
    if not src.is_dir():
        continue
    mods = modules(src)
    graph = {}
    for mod, f in mods.items():
        text = strip_comments(strip_tests(f.read_text()))
        graph[mod] = deps(mod, text, mods)
    for c in cycles(graph):
        bad += 1
        print(f"{crate.name}: " + " -> ".join("::".join(m) for m in c))
if bad:
    sys.exit(f"{bad} import circle(s) between files")
print("no import circles between files")
