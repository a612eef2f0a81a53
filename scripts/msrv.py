#!/usr/bin/env python3
"""The workspace's `rust-version` is true: clippy's `incompatible_msrv` lint (deny, in
Cargo.toml) refuses a standard-library API newer than it, and this script refuses a
dependency that declares a newer one. Dependencies are those a Linux build of the
libraries and the binary takes (normal and build dependencies, not dev-dependencies:
the tests may need a newer toolchain, e.g. loom's `generator` declares 1.95)."""
import json, subprocess, sys, tomllib

def version(v):
    return tuple(int(x) for x in v.split("."))

with open("Cargo.toml", "rb") as f:
    ours = tomllib.load(f)["workspace"]["package"]["rust-version"]
tree = subprocess.run(
    ["cargo", "tree", "--workspace", "-e", "normal,build", "--target", "x86_64-unknown-linux-gnu",
     "--prefix", "none", "--no-dedupe", "--format", "{p}"],
    check=True, capture_output=True, text=True).stdout
used = {line.split()[0] for line in tree.splitlines() if line.strip()}
meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1"],
                                 check=True, capture_output=True, text=True).stdout)
newer = [(p["name"], p["rust_version"]) for p in meta["packages"]
         if p["name"] in used and p.get("rust_version") and version(p["rust_version"]) > version(ours)]
if newer:
    sys.exit(f"rust-version {ours} is not true: " + ", ".join(f"{n} needs {v}" for n, v in newer))
print(f"rust-version {ours}: {len(used)} dependencies of the build declare it or older")
