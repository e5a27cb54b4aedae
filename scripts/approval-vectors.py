#!/usr/bin/env python3
"""Writes docs/spec/approval-vectors.json: test vectors for signed human approvals
(docs/spec/approvals.md), made only with tools independent of the Rust code base:

- the action digest: Python `cbor2` (canonical=True) and hashlib SHA-256;
- EIP-712: PyPI `eth-account` (encode_typed_data, Account.sign_typed_data);
- OpenSSH: the system `ssh-keygen` (fresh ed25519 and ECDSA P-256 keys with an empty passphrase
  in a temporary directory, `ssh-keygen -Y sign -n afr-approval-v1 -f KEY`, message on stdin).

The constructions live in tests/approvals/afr_approval.py, shared with
tests/approvals/test_vectors.py, which re-checks the written file with the same tools.
Everything is reproducible except the SSH part (fresh random keys, ECDSA's random nonce).

Usage: .venv/bin/python scripts/approval-vectors.py   (scripts/setup.sh installs the pins of
tests/approvals/requirements.txt into .venv/)
"""

import hashlib
import json
import pathlib
import subprocess
import sys
import tempfile
from importlib.metadata import version

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "approvals"))

from eth_account import Account  # noqa: E402

import afr_approval as afr  # noqa: E402

OUT = ROOT / "docs" / "spec" / "approval-vectors.json"

# The well-known anvil/hardhat test keys (accounts 0 and 1): never hold anything real.
KEY_0 = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
KEY_1 = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"
RECORDER = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"  # the address of KEY_0
ISSUED_AT = 1767225600  # 2026-01-01T00:00:00Z
EXPIRES_AT = 1767229200  # one hour later

# A tool name and a target that a careless line format would let forge a line: a quote, a
# backslash, a newline, a tab, another control character, DEL (U+007F) and U+2028 (both written
# as themselves), and non-ASCII text.
TRICKY_TOOL = 'psql "prod"\\\nDROP\tx\x01 naïve — 日本語 \x7f\u2028😀'
TRICKY_TARGET = 'db "main"\nrecorder: 0x0000000000000000000000000000000000000000'


def nonce(label):
    """A fixed nonce per case (reproducible): SHA-256 of a label, 64 lower-case hex."""
    return hashlib.sha256(f"afr-approval-vectors nonce {label}".encode()).hexdigest()


def action_cases():
    drop_args = {"command": "DROP TABLE users;", "database": "prod"}
    mcp_args = {"path": "/tmp/afr-mcp/notes.txt", "content": "hello\n"}
    return [
        (
            "psql-drop-table",
            afr.intent_map("psql", drop_args),
            afr.execution_map("psql -c 'DROP TABLE users;'", target="db.prod.internal", mutation=drop_args),
        ),
        ("no-args-no-execution", afr.intent_map("git status"), None),
        (
            "nested-args",
            afr.intent_map(
                "deploy",
                {
                    "text": "héllo wörld — 日本語 😀",
                    "negative": -42,
                    "float": 1.5,
                    "big": 2**63,
                    "flags": [True, False],
                    "list": [1, None, "two"],
                    "empty_map": {},
                    "empty_list": [],
                    "nested": {"deeper": {"n": 0, "s": ""}},
                },
            ),
            afr.execution_map("deploy --all"),
        ),
        (
            "mcp-tools-call",
            afr.intent_map("write_file", mcp_args),
            afr.execution_map(
                "tools/call",
                target="secure-filesystem-server 0.2.0 (npx -y @modelcontextprotocol/server-filesystem /tmp/afr-mcp)",
                mutation=mcp_args,
            ),
        ),
        (
            # Keys sorted by their encoded bytes: "a" "b" (1 byte) before "aa" "zz" (2 bytes)
            # before "é" (2 UTF-8 bytes c3 a9, after "zz"'s 7a 7a) before "bbb"; not by code point
            # ("aa" < "b") nor by character count ("é" before "zz").
            "key-order",
            afr.intent_map("sort", {"b": 1, "aa": 2, "a": 3, "é": 4, "zz": 5, "bbb": 6}),
            afr.execution_map("sort", target="t"),
        ),
        (
            "floats-and-integers",
            afr.intent_map(
                "numbers",
                {
                    "half": 0.5,
                    "single": 100000.5,
                    "double": 1.1,
                    "minus": -2.5,
                    "u8": 24,
                    "u16": 500,
                    "u32": 70000,
                    "u64": 18446744073709551615,
                    "i64_min": -(2**63),
                },
            ),
            afr.execution_map("calc", mutation=[0.1, -0.0, 65504.0]),
        ),
    ]


def main():
    actions = []
    for name, intent, execution in action_cases():
        cbor = afr.action_cbor(intent, execution)
        actions.append(
            {
                "name": name,
                "intent": intent,
                "execution": execution,
                "cbor": cbor.hex(),
                "action": hashlib.sha256(cbor).hexdigest(),
            }
        )
    digest = {a["name"]: a["action"] for a in actions}

    def statement(action, tool, target, decision, label, expires_at=EXPIRES_AT):
        return {
            "action": digest[action],
            "tool": tool,
            "target": target,
            "decision": decision,
            "recorder": RECORDER,
            "issued_at": ISSUED_AT,
            "expires_at": expires_at,
            "nonce": nonce(label),
        }

    eip712 = []
    for name, key, st in [
        ("approved", KEY_1, statement("psql-drop-table", "psql", "db.prod.internal", "approved", "eip712-approved")),
        ("rejected", KEY_0, statement("no-args-no-execution", "git status", "", "rejected", "eip712-rejected")),
        ("tricky-text", KEY_1, statement("mcp-tools-call", TRICKY_TOOL, TRICKY_TARGET, "approved", "eip712-tricky")),
        (
            "max-uint64-expiry",
            KEY_0,
            statement("nested-args", "deploy", "", "approved", "eip712-max", expires_at=2**64 - 1),
        ),
    ]:
        signable = afr.eip712_signable(st)
        signed = Account.sign_typed_data(key, full_message=afr.eip712_typed_data(st))
        signer = Account.from_key(key).address.lower()
        assert Account.recover_message(signable, signature=signed.signature).lower() == signer
        sig = bytes(signed.signature)
        assert len(sig) == 65 and sig[64] in (27, 28)
        eip712.append(
            {
                "name": name,
                "statement": st,
                "domain_separator": "0x" + bytes(signable.header).hex(),
                "struct_hash": "0x" + bytes(signable.body).hex(),
                "signing_hash": "0x" + bytes(signed.message_hash).hex(),
                "private_key": key,
                "signer": signer,
                "signature": "0x" + sig.hex(),
            }
        )

    ssh = []
    with tempfile.TemporaryDirectory(prefix="afr-approval-vectors-") as d:
        keys = {t: afr.ssh_keygen_new(d, t) for t in ("ed25519", "ecdsa-p256")}
        for name, key, st in [
            ("ed25519", "ed25519", statement("psql-drop-table", "psql", "db.prod.internal", "approved", "ssh-ed25519")),
            ("ecdsa-p256", "ecdsa-p256", statement("key-order", "sort", "t", "rejected", "ssh-ecdsa-p256")),
            (
                "tricky-text",
                "ed25519",
                statement("mcp-tools-call", TRICKY_TOOL, TRICKY_TARGET, "approved", "ssh-tricky"),
            ),
        ]:
            path, signer = keys[key]
            message = afr.ssh_message(st)
            signature = afr.ssh_sign(path, message)
            assert afr.ssh_signer_of(signature) == signer
            ok, out = afr.ssh_verify(signer, signature, message)
            assert ok, out
            ssh.append(
                {
                    "name": name,
                    "key_type": signer.split()[0],
                    "statement": st,
                    "message": message,
                    "signer": signer,
                    "signature": signature,
                }
            )

    ssh_version = subprocess.run(["ssh", "-V"], capture_output=True, text=True, check=True)
    ssh_version = (ssh_version.stderr or ssh_version.stdout).strip()
    doc = {
        "description": (
            "Test vectors for signed human approvals (docs/spec/approvals.md). actions: the action "
            'digest, cbor = CBOR(["afr-action", 1, intent, execution]) in RFC 8949 deterministic '
            "encoding, action = SHA-256(cbor); execution null is CBOR null. eip712: "
            "EIP712Domain(string name,string version) {name: \"Agent Flight Recorder\", version: "
            '"1"}, AfrApproval(bytes32 action,string tool,string target,string decision,address '
            "recorder,uint64 issuedAt,uint64 expiresAt,bytes32 nonce); signing_hash = "
            "keccak256(0x19 0x01 domain_separator struct_hash); signature r||s||v (v 27/28) by "
            "private_key (well-known anvil test keys). ssh: message is the exact signed UTF-8 text, "
            "signature the armored SSHSIG that `ssh-keygen -Y sign -n afr-approval-v1` wrote with a "
            "fresh key, signer the key inside it. Statements' action values are digests of the "
            "actions above."
        ),
        "generated_by": (
            f"scripts/approval-vectors.py with cbor2 {version('cbor2')} (canonical=True), "
            f"eth-account {version('eth-account')}, {ssh_version} (ssh-keygen)"
        ),
        "actions": actions,
        "eip712": eip712,
        "ssh": ssh,
    }
    OUT.write_text(json.dumps(doc, indent=2, ensure_ascii=True) + "\n", encoding="ascii")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(actions)} actions, {len(eip712)} eip712, {len(ssh)} ssh")


if __name__ == "__main__":
    main()
