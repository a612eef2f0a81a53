#!/usr/bin/env python3
"""The recorded verdicts of corpus/msccl/SOURCES.toml are the interpreter's.

crates/schedule/tests/msccl_corpus.rs holds railyard's checker to the `interp` verdict
recorded for every program; this runs scripts/msccl_interp.py on every program again and
fails where its verdict (with the file's `interp_args`, if any, against
`interp_with_args`) differs from the one recorded, so neither can drift alone.

    python3 scripts/msccl_corpus.py
"""

import json
import pathlib
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "corpus" / "msccl"


def verdicts(files, extra=()):
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "msccl_interp.py"), "--json", *extra, *files],
        capture_output=True, text=True, cwd=CORPUS, check=False,
    )
    return {r["file"]: r["verdict"] for r in json.loads(out.stdout)}


def main():
    sources = tomllib.loads((CORPUS / "SOURCES.toml").read_text())
    entries = sources["file"]
    found = verdicts([e["name"] for e in entries])
    wrong = []
    for e in entries:
        if found.get(e["name"]) != e["interp"]:
            wrong.append(f"{e['name']}: recorded {e['interp']}, interpreter {found.get(e['name'])}")
        if "interp_args" in e:
            again = verdicts([e["name"]], e["interp_args"]).get(e["name"])
            if again != e["interp_with_args"]:
                wrong.append(f"{e['name']} {e['interp_args']}: recorded {e['interp_with_args']}, interpreter {again}")
    listed = {e["name"] for e in entries}
    on_disk = {p.name for p in CORPUS.glob("*.xml")}
    wrong += [f"{n}: on disk, not in SOURCES.toml" for n in sorted(on_disk - listed)]
    wrong += [f"{n}: in SOURCES.toml, not on disk" for n in sorted(listed - on_disk)]
    if wrong:
        sys.exit("msccl corpus:\n" + "\n".join(wrong))
    print(f"msccl corpus: {len(entries)} programs, the interpreter's verdicts as recorded")


if __name__ == "__main__":
    main()
