"""The signed-approval constructions of docs/spec/approvals.md, built with tools independent of
the Rust code base: `cbor2` (canonical=True) for the action digest, `eth-account` for EIP-712,
and the system `ssh-keygen` for SSHSIG signatures.

One implementation, shared by scripts/approval-vectors.py (which writes
docs/spec/approval-vectors.json) and tests/approvals/test_vectors.py (which re-checks that file).
"""

import base64
import hashlib
import json
import os
import subprocess
import tempfile

import cbor2
from eth_account.messages import encode_typed_data

NAMESPACE = "afr-approval-v1"
EIP712_DOMAIN = {"name": "Agent Flight Recorder", "version": "1"}
EIP712_TYPES = {
    "EIP712Domain": [
        {"name": "name", "type": "string"},
        {"name": "version", "type": "string"},
    ],
    "AfrApproval": [
        {"name": "action", "type": "bytes32"},
        {"name": "tool", "type": "string"},
        {"name": "target", "type": "string"},
        {"name": "decision", "type": "string"},
        {"name": "recorder", "type": "address"},
        {"name": "issuedAt", "type": "uint64"},
        {"name": "expiresAt", "type": "uint64"},
        {"name": "nonce", "type": "bytes32"},
    ],
}
# Statement fields in the order of the spec's table (and of the SSH message).
STATEMENT_FIELDS = ("action", "tool", "target", "decision", "recorder", "issued_at", "expires_at", "nonce")


# ---------------------------------------------------------------------------------------------
# §1 The action digest


def intent_map(tool, args=None):
    """`intent` as in the payload: `args` left out when absent (a JSON null args is absent too)."""
    m = {"tool": tool}
    if args is not None:
        m["args"] = args
    return m


def execution_map(command, target=None, mutation=None):
    """`execution` as in the payload: absent (or JSON null) members left out."""
    m = {"command": command}
    if target is not None:
        m["target"] = target
    if mutation is not None:
        m["mutation"] = mutation
    return m


def action_cbor(intent, execution):
    """CBOR(["afr-action", 1, intent, execution]), RFC 8949 §4.2.1 deterministic (cbor2 canonical).

    `intent` and `execution` are JSON values as json.loads gives them (dict, list, str, int,
    float, bool, None); `execution` None encodes as CBOR null (f6).
    """
    return cbor2.dumps(["afr-action", 1, intent, execution], canonical=True)


def action_digest(intent, execution):
    """The action digest: 64 lower-case hex digits of SHA-256 over action_cbor."""
    return hashlib.sha256(action_cbor(intent, execution)).hexdigest()


# ---------------------------------------------------------------------------------------------
# §2.1 EIP-712


def eip712_message(statement):
    """The AfrApproval message of a statement (JSON field names mapped to the struct's)."""
    return {
        "action": bytes.fromhex(statement["action"]),
        "tool": statement["tool"],
        "target": statement["target"],
        "decision": statement["decision"],
        "recorder": statement["recorder"],
        "issuedAt": statement["issued_at"],
        "expiresAt": statement["expires_at"],
        "nonce": bytes.fromhex(statement["nonce"]),
    }


def eip712_typed_data(statement):
    """The full typed data (the eth_signTypedData_v4 shape) of a statement."""
    return {
        "types": EIP712_TYPES,
        "primaryType": "AfrApproval",
        "domain": dict(EIP712_DOMAIN),
        "message": eip712_message(statement),
    }


def eip712_signable(statement):
    """eth-account's SignableMessage: header = domain separator, body = hashStruct(statement)."""
    return encode_typed_data(full_message=eip712_typed_data(statement))


# ---------------------------------------------------------------------------------------------
# §2.2 OpenSSH signatures


def json_string(s):
    """A JSON string (RFC 8259) with only the required escapes: \\" \\\\ \\b \\f \\n \\r \\t and
    \\u00xx (lower-case hex) for the other characters below U+0020; everything else literal.

    Python's json.dumps(ensure_ascii=False) is exactly that (tests/approvals/test_vectors.py
    checks it against the rule character by character).
    """
    return json.dumps(s, ensure_ascii=False)


def ssh_message(statement):
    """The exact UTF-8 text an SSH key signs for a statement (spec §2.2)."""
    s = statement
    lines = [
        NAMESPACE,
        f"action: {s['action']}",
        f"tool: {json_string(s['tool'])}",
        f"target: {json_string(s['target'])}",
        f"decision: {s['decision']}",
        f"recorder: {s['recorder']}",
        f"issued-at: {int(s['issued_at'])}",
        f"expires-at: {int(s['expires_at'])}",
        f"nonce: {s['nonce']}",
    ]
    return "".join(line + "\n" for line in lines)


def ssh_keygen_new(directory, key_type):
    """Generates a key with an empty passphrase; returns (private key path, "<type> <base64>")."""
    path = os.path.join(directory, f"id_{key_type.replace('-', '_')}")
    args = {"ed25519": ["-t", "ed25519"], "ecdsa-p256": ["-t", "ecdsa", "-b", "256"]}[key_type]
    subprocess.run(
        ["ssh-keygen", "-q", *args, "-N", "", "-C", "afr-approval-vectors", "-f", path],
        check=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    with open(path + ".pub", encoding="ascii") as f:
        key_type_name, blob = f.read().split()[:2]
    return path, f"{key_type_name} {blob}"


def ssh_sign(private_key_path, message):
    """`ssh-keygen -Y sign -n afr-approval-v1 -f KEY`, message on stdin, armored signature out."""
    out = subprocess.run(
        ["ssh-keygen", "-Y", "sign", "-n", NAMESPACE, "-f", private_key_path],
        input=message.encode("utf-8"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        check=True,
    )
    return out.stdout.decode("ascii")


def ssh_verify(signer, signature, message, namespace=NAMESPACE, identity="approver@vectors"):
    """`ssh-keygen -Y verify` against an allowed_signers file holding only `signer`.

    Returns (ok, ssh-keygen's output).
    """
    with tempfile.TemporaryDirectory(prefix="afr-approval-verify-") as d:
        allowed = os.path.join(d, "allowed_signers")
        sig = os.path.join(d, "message.sig")
        with open(allowed, "w", encoding="ascii") as f:
            f.write(f'{identity} namespaces="{NAMESPACE}" {signer}\n')
        with open(sig, "w", encoding="ascii") as f:
            f.write(signature)
        out = subprocess.run(
            ["ssh-keygen", "-Y", "verify", "-f", allowed, "-I", identity, "-n", namespace, "-s", sig],
            input=message.encode("utf-8"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        return out.returncode == 0, out.stdout.decode("utf-8", "replace")


def _ssh_string(buf, pos):
    n = int.from_bytes(buf[pos : pos + 4], "big")
    return buf[pos + 4 : pos + 4 + n], pos + 4 + n


def sshsig_fields(armored):
    """Parses an armored SSHSIG (PROTOCOL.sshsig): returns a dict with the public key blob,
    namespace, reserved, hash algorithm and signature blob."""
    lines = armored.strip().split("\n")
    if lines[0] != "-----BEGIN SSH SIGNATURE-----" or lines[-1] != "-----END SSH SIGNATURE-----":
        raise ValueError("not an armored SSH signature")
    blob = base64.b64decode("".join(lines[1:-1]), validate=True)
    if blob[:6] != b"SSHSIG":
        raise ValueError("no SSHSIG magic")
    version = int.from_bytes(blob[6:10], "big")
    pos = 10
    fields = {"version": version}
    for name in ("public_key", "namespace", "reserved", "hash_algorithm", "signature"):
        fields[name], pos = _ssh_string(blob, pos)
    if pos != len(blob):
        raise ValueError("trailing bytes after the SSHSIG signature")
    return fields


def ssh_signer_of(armored):
    """The signer inside a signature, as "<key type> <base64>" (no comment)."""
    key = sshsig_fields(armored)["public_key"]
    key_type, _ = _ssh_string(key, 0)
    return f"{key_type.decode('ascii')} {base64.b64encode(key).decode('ascii')}"
