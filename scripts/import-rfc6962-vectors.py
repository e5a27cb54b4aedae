#!/usr/bin/env python3
"""Converts the RFC 6962 inclusion-proof vectors in ../shared/testvectors/rfc6962/inclusion/
(base64, one case per file) into contracts/test/vectors/rfc6962-inclusion.json (hex, one file)
for forge, and copies their licence beside it.

Each case keeps its directory-relative name and wantErr. Cases whose hashes are not exactly 32
bytes (empty or garbage-padded values) cannot be passed as bytes32 and are listed as skipped.

Usage: scripts/import-rfc6962-vectors.py [SOURCE_DIR]
"""

import base64
import json
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared/testvectors/rfc6962"
OUT_DIR = ROOT / "contracts/test/vectors"


def hash32(b64: str):
    raw = base64.b64decode(b64)
    return "0x" + raw.hex() if len(raw) == 32 else None


def main() -> int:
    vectors, skipped = [], []
    for f in sorted((SRC / "inclusion").rglob("*.json")):
        name = f.relative_to(SRC / "inclusion").with_suffix("").as_posix()
        case = json.loads(f.read_text())
        proof = [hash32(p) for p in case["proof"] or []]
        root, leaf = hash32(case["root"]), hash32(case["leafHash"])
        idx, size = case["leafIdx"], case["treeSize"]
        if None in proof or root is None or leaf is None or not (0 <= idx < 2**64 and 0 <= size < 2**64):
            skipped.append(name)
            continue
        # Keys in alphabetical order: forge decodes JSON objects into structs in that order.
        vectors.append({"leafHash": leaf, "leafIdx": idx, "name": name, "proof": proof,
                        "root": root, "treeSize": size, "wantErr": case["wantErr"]})
    out = {"source": "shared/testvectors/rfc6962/inclusion (Apache-2.0, see LICENSE)",
           "skipped": skipped, "vectors": vectors}
    (OUT_DIR / "rfc6962-inclusion.json").write_text(json.dumps(out, indent=1) + "\n")
    shutil.copyfile(SRC / "LICENSE", OUT_DIR / "LICENSE")
    print(f"{len(vectors)} vectors ({sum(not v['wantErr'] for v in vectors)} happy paths), "
          f"{len(skipped)} skipped: {', '.join(skipped)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
