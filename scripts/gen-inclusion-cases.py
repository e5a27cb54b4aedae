#!/usr/bin/env python3
"""Writes contracts/test/vectors/inclusion-cases.json: RFC 6962 inclusion proofs for every leaf of
every tree of 1 to 64 leaves, from a naive recursive reference implementation.

Leaf i is the record u64be(i) (8 bytes), so its leaf hash is SHA-256(0x00 || u64be(i)).
The output is byte-exact and shared with the Rust core, which regenerates it and compares:
compact JSON (no spaces), keys in the order size, index, leafHash, proof, root, cases ordered by
size then index, lower-case 0x-prefixed hex, one trailing newline.

Usage: scripts/gen-inclusion-cases.py [--check]
"""

import hashlib
import json
import pathlib
import struct
import sys

MAX_SIZE = 64
LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
OUT = pathlib.Path(__file__).resolve().parent.parent / "contracts/test/vectors/inclusion-cases.json"


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def leaf_hash(record: bytes) -> bytes:
    return sha256(LEAF_PREFIX + record)


def split(n: int) -> int:
    """RFC 6962: the largest power of two strictly below n (n >= 2)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(leaves: list[bytes]) -> bytes:
    """Merkle tree hash (RFC 6962 section 2.1) over leaf hashes."""
    if len(leaves) == 1:
        return leaves[0]
    k = split(len(leaves))
    return sha256(NODE_PREFIX + mth(leaves[:k]) + mth(leaves[k:]))


def path(m: int, leaves: list[bytes]) -> list[bytes]:
    """Audit path PATH(m, D[n]) (RFC 6962 section 2.1.1), leaf sibling first."""
    if len(leaves) == 1:
        return []
    k = split(len(leaves))
    if m < k:
        return path(m, leaves[:k]) + [mth(leaves[k:])]
    return path(m - k, leaves[k:]) + [mth(leaves[:k])]


def hx(b: bytes) -> str:
    return "0x" + b.hex()


def render() -> str:
    cases = []
    for size in range(1, MAX_SIZE + 1):
        leaves = [leaf_hash(struct.pack(">Q", i)) for i in range(size)]
        root = mth(leaves)
        for index in range(size):
            cases.append(
                {
                    "size": size,
                    "index": index,
                    "leafHash": hx(leaves[index]),
                    "proof": [hx(p) for p in path(index, leaves)],
                    "root": hx(root),
                }
            )
    return json.dumps({"cases": cases}, separators=(",", ":")) + "\n"


def main() -> int:
    text = render()
    if sys.argv[1:] == ["--check"]:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is stale: run scripts/gen-inclusion-cases.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
