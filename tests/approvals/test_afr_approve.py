"""`afr approve` checked by tools independent of AFR's Rust code.

`afr approve --file EVENT --eth-key KEY` and `--ssh-key KEY` sign the action of an event file
and print the `human_approval` object. Here cbor2 recomputes the action digest from the event
file, eth-account recovers the EIP-712 signer, and `ssh-keygen -Y verify` checks the SSH
signature over the text rebuilt from the statement. The binary is $AFR_BIN (scripts/test.sh
points it at the debug build); without it these tests are skipped.
"""

import json
import os
import subprocess

import pytest
from eth_account import Account

import afr_approval as A

AFR = os.environ.get("AFR_BIN")
pytestmark = pytest.mark.skipif(not AFR, reason="AFR_BIN is not set (scripts/test.sh sets it)")

BOB_KEY = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
BOB = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"
RECORDER = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
EVENT = {
    "category": "database",
    "intent": {"tool": "psql", "args": {"sql": "DROP TABLE users", "rows": 48213, "ratio": 0.5}},
    "execution": {"command": "DROP TABLE users", "target": "db.prod.internal"},
}


def approve(tmp_path, *signing):
    event = tmp_path / "event.json"
    event.write_text(json.dumps(EVENT))
    out = subprocess.run(
        [AFR, "--dir", str(tmp_path / "afr"), "approve", "--file", str(event),
         "--recorder", RECORDER, "--as", "bob", *signing],
        check=True, capture_output=True, text=True,
    )
    return json.loads(out.stdout)


def check_statement(st):
    assert st["action"] == A.action_digest(EVENT["intent"], EVENT["execution"])
    assert (st["tool"], st["target"], st["decision"]) == ("psql", "db.prod.internal", "approved")
    assert st["recorder"] == RECORDER
    assert 0 < st["expires_at"] - st["issued_at"] <= 600
    assert len(bytes.fromhex(st["nonce"])) == 32


def test_eip712_signature_recovers_with_eth_account(tmp_path):
    key = tmp_path / "bob.key"
    key.write_text(BOB_KEY)
    key.chmod(0o600)
    h = approve(tmp_path, "--eth-key", str(key))
    sig = h["signature"]
    assert sig["scheme"] == "eip712" and sig["signer"] == BOB
    check_statement(sig["statement"])
    signer = Account.recover_message(A.eip712_signable(sig["statement"]), signature=sig["signature"])
    assert signer.lower() == BOB
    # A key file others can read is refused.
    key.chmod(0o644)
    with pytest.raises(subprocess.CalledProcessError):
        approve(tmp_path, "--eth-key", str(key))


def test_ssh_signature_verifies_with_ssh_keygen(tmp_path):
    private, public = A.ssh_keygen_new(str(tmp_path), "ed25519")
    h = approve(tmp_path, "--ssh-key", str(private))
    sig = h["signature"]
    assert sig["scheme"] == "ssh"
    check_statement(sig["statement"])
    message = A.ssh_message(sig["statement"])
    assert sig["signer"] == public
    ok, out = A.ssh_verify(sig["signer"], sig["signature"], message)
    assert ok, out
    ok, _ = A.ssh_verify(sig["signer"], sig["signature"], message.replace("psql", "psq1"))
    assert not ok
