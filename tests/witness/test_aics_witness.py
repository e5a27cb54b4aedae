"""`afr witness serve` driven by an independent tlog-witness client: the PyPI `aics-witness`
feeder (`WitnessClient`, its 409 resync and cosignature checks) over a log built with
`aics-tlog` (its Merkle tree, its Ed25519 note signatures), with the cosigned checkpoints
verified by `aics_tlog.verify_checkpoint`. Nothing here is AFR code but the server.

Run: AFR_BIN=target/debug/afr tests/witness/.venv/bin/python -m pytest tests/witness
"""

import hashlib
import os
import re
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from aics_tlog import (
    Checkpoint,
    MerkleTree,
    parse_note,
    parse_vkey,
    sign_checkpoint,
    verify_checkpoint,
    vkey_from_ed25519,
)
from aics_witness.feeder import WitnessAhead, WitnessClient, WitnessRejected, merge_cosignatures
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ORIGIN = "aics.test/log"
NAME = "witness.test/py"
# The command that runs the witness (until `afr witness serve` is wired in cli/src/main.rs).
SERVE = ["witness", "serve"]


@pytest.fixture()
def witness():
    afr = os.environ.get("AFR_BIN", "target/debug/afr")
    key = Ed25519PrivateKey.from_private_bytes(bytes([5]) * 32)
    log_vkey = vkey_from_ed25519(ORIGIN, key.public_key())
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [afr, *SERVE, "--key", f"{tmp}/w.key", "--init", "--name", NAME,
               "--log", _fmt(log_vkey), "--state", f"{tmp}/state", "--listen", "127.0.0.1:0"]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            vkey, addr = None, None
            deadline = time.time() + 60
            while addr is None and time.time() < deadline:
                line = p.stderr.readline()
                assert line, "afr witness serve exited"
                if m := re.search(r"witness vkey (\S+)", line):
                    vkey = m.group(1)
                if m := re.search(r"listening on (http://\S+)", line):
                    addr = m.group(1)
            yield key, vkey, addr, Path(tmp)
        finally:
            p.terminate()
            p.wait(10)


def _fmt(vkey):
    from aics_tlog import format_vkey
    return format_vkey(vkey)


def _signed(key, tree, n):
    cp = Checkpoint(origin=ORIGIN, size=n, root=tree.root(n))
    return sign_checkpoint(cp, key, ORIGIN).to_bytes()


def test_feeder_gets_verifiable_cosignatures_and_resyncs(witness):
    key, vkey, addr, tmp = witness
    tree = MerkleTree([hashlib.sha256(b"epoch %d" % i).digest() for i in range(10)])
    client = WitnessClient(addr, vkey, state_path=tmp / "feeder.json")
    wkey = parse_vkey(vkey)
    for n in (3, 7, 10):
        note = _signed(key, tree, n)
        lines = client.submit(note, tree.consistency_proof)
        merged = parse_note(merge_cosignatures(note, lines))
        res = verify_checkpoint(merged, vkey_from_ed25519(ORIGIN, key.public_key()), [wkey], 1,
                                expected_origin=ORIGIN, max_future_seconds=30)
        assert res.ok, res
    # A fresh client (no state) starts at 0, gets 409 "10" and resyncs with a proof.
    tree.append(hashlib.sha256(b"epoch 10").digest())
    fresh = WitnessClient(addr, vkey)
    assert fresh.submit(_signed(key, tree, 11), tree.consistency_proof).startswith("\u2014 " + NAME)
    # A stale checkpoint: the witness is ahead.
    with pytest.raises(WitnessAhead):
        WitnessClient(addr, vkey).submit(_signed(key, tree, 5), tree.consistency_proof)
    # A fork of the same size: refused (422), and kept as evidence.
    forked = MerkleTree([hashlib.sha256(b"fork %d" % i).digest() for i in range(12)])
    with pytest.raises(WitnessRejected) as e:
        fresh.submit(_signed(key, forked, 12), forked.consistency_proof)
    assert e.value.status == 422
    h = hashlib.sha256(ORIGIN.encode()).hexdigest()
    assert "422" in (tmp / "state" / h / "refused.log").read_text()
    # The monitoring endpoint serves the cosigned head, which verifies independently.
    with urllib.request.urlopen(f"{addr}/{h}/checkpoint") as r:
        served = parse_note(r.read())
    res = verify_checkpoint(served, vkey_from_ed25519(ORIGIN, key.public_key()), [wkey], 1,
                            expected_origin=ORIGIN, max_future_seconds=30)
    assert res.ok and served.text.split("\n")[1] == "11", res
