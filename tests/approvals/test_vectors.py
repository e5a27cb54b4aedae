"""Re-checks docs/spec/approval-vectors.json with the independent tools (cbor2, eth-account,
ssh-keygen) on every run of scripts/test.sh, and checks the spec's JSON-string rule for the SSH
message builder (tests/approvals/afr_approval.py, shared with scripts/approval-vectors.py).

Run: .venv/bin/python -m pytest -p no:cacheprovider -q tests/approvals
"""

import hashlib
import json
import pathlib
import re

import cbor2
import pytest
from eth_account import Account
from eth_keys import KeyAPI
from eth_utils import keccak

import afr_approval as afr

ROOT = pathlib.Path(__file__).resolve().parents[2]
VECTORS = json.loads((ROOT / "docs" / "spec" / "approval-vectors.json").read_text(encoding="utf-8"))
HEX64 = re.compile(r"^[0-9a-f]{64}$")
ADDRESS = re.compile(r"^0x[0-9a-f]{40}$")


def by_name(section):
    return pytest.mark.parametrize("case", VECTORS[section], ids=[c["name"] for c in VECTORS[section]])


def test_layout():
    assert set(VECTORS) == {"description", "generated_by", "actions", "eip712", "ssh"}
    assert len(VECTORS["actions"]) >= 6 and len(VECTORS["eip712"]) >= 3 and len(VECTORS["ssh"]) >= 3
    for a in VECTORS["actions"]:
        assert set(a) == {"name", "intent", "execution", "cbor", "action"}
    for e in VECTORS["eip712"]:
        assert set(e) == {
            "name", "statement", "domain_separator", "struct_hash", "signing_hash",
            "private_key", "signer", "signature",
        }
    for s in VECTORS["ssh"]:
        assert set(s) == {"name", "key_type", "statement", "message", "signer", "signature"}
    assert {s["key_type"] for s in VECTORS["ssh"]} >= {"ssh-ed25519", "ecdsa-sha2-nistp256"}
    for section in ("actions", "eip712", "ssh"):
        names = [c["name"] for c in VECTORS[section]]
        assert len(set(names)) == len(names)


# ---------------------------------------------------------------------------------------------
# §1 action digest


@by_name("actions")
def test_action_cbor_and_digest(case):
    intent, execution = case["intent"], case["execution"]
    assert isinstance(intent.get("tool"), str) and set(intent) <= {"tool", "args"}
    assert intent.get("args", 0) is not None
    if execution is not None:
        assert isinstance(execution.get("command"), str)
        assert set(execution) <= {"command", "target", "mutation"}
        assert all(v is not None for v in execution.values())
    cbor = afr.action_cbor(intent, execution)
    assert cbor.hex() == case["cbor"]
    assert hashlib.sha256(cbor).hexdigest() == case["action"]
    assert HEX64.match(case["action"])
    # The stored bytes decode to exactly the stored values, and re-encode to themselves.
    decoded = cbor2.loads(bytes.fromhex(case["cbor"]))
    assert decoded == ["afr-action", 1, intent, execution]
    assert cbor2.dumps(decoded, canonical=True) == cbor


def _maps(value):
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _maps(v)
    elif isinstance(value, list):
        for v in value:
            yield from _maps(v)


@by_name("actions")
def test_map_keys_sorted_by_encoded_bytes(case):
    # cbor2.loads keeps the order the keys were encoded in.
    for m in _maps(cbor2.loads(bytes.fromhex(case["cbor"]))):
        keys = list(m)
        assert keys == sorted(keys, key=lambda k: cbor2.dumps(k))


def test_key_order_case_tells_the_orders_apart():
    case = next(a for a in VECTORS["actions"] if a["name"] == "key-order")
    keys = list(cbor2.loads(bytes.fromhex(case["cbor"]))[2]["args"])
    assert keys == ["a", "b", "aa", "zz", "é", "bbb"]
    assert keys != sorted(keys)  # not code-point order ("aa" < "b")
    assert keys != sorted(keys, key=lambda k: (len(k), k))  # not character-count order ("é" < "zz")


def test_float_and_integer_forms():
    heads = {a["name"]: a["cbor"] for a in VECTORS["actions"]}
    assert "f93e00" in heads["nested-args"]  # 1.5 as a half
    assert "1b8000000000000000" in heads["nested-args"]  # 2**63 as a major-0 uint64
    assert "3829" in heads["nested-args"]  # -42
    floats = heads["floats-and-integers"]
    for encoded in ("f93800", "fa47c35040", "fb3ff199999999999a", "f9c100", "f98000", "f97bff",
                    "1bffffffffffffffff", "3b7fffffffffffffff", "1818", "1901f4", "1a00011170"):
        assert encoded in floats


def test_null_execution_is_cbor_null():
    case = next(a for a in VECTORS["actions"] if a["execution"] is None)
    assert case["cbor"].endswith("f6")


# ---------------------------------------------------------------------------------------------
# §2 statements


def _statements():
    return [c["statement"] for section in ("eip712", "ssh") for c in VECTORS[section]]


@pytest.mark.parametrize("statement", _statements())
def test_statement_fields(statement):
    assert list(statement) == list(afr.STATEMENT_FIELDS)
    assert HEX64.match(statement["action"]) and HEX64.match(statement["nonce"])
    assert statement["action"] in {a["action"] for a in VECTORS["actions"]}
    assert isinstance(statement["tool"], str) and isinstance(statement["target"], str)
    assert statement["decision"] in ("approved", "rejected")
    assert ADDRESS.match(statement["recorder"])
    for f in ("issued_at", "expires_at"):
        assert type(statement[f]) is int and 0 <= statement[f] < 2**64
    assert statement["issued_at"] <= statement["expires_at"]


def test_nonces_are_unique():
    nonces = [s["nonce"] for s in _statements()]
    assert len(set(nonces)) == len(nonces)


# ---------------------------------------------------------------------------------------------
# §2.1 EIP-712


@by_name("eip712")
def test_eip712_hashes_and_signer(case):
    st = case["statement"]
    signable = afr.eip712_signable(st)
    assert signable.version == b"\x01"
    assert "0x" + bytes(signable.header).hex() == case["domain_separator"]
    assert "0x" + bytes(signable.body).hex() == case["struct_hash"]
    signing = keccak(b"\x19\x01" + bytes(signable.header) + bytes(signable.body))
    assert "0x" + signing.hex() == case["signing_hash"]

    sig = bytes.fromhex(case["signature"].removeprefix("0x"))
    assert re.fullmatch(r"0x[0-9a-f]{130}", case["signature"]) and sig[64] in (27, 28)
    assert ADDRESS.match(case["signer"])
    assert Account.recover_message(signable, signature=sig).lower() == case["signer"]
    assert Account.from_key(case["private_key"]).address.lower() == case["signer"]
    # Recovered from signing_hash alone with eth-keys (v = 0/1 there, which the spec accepts too).
    recovered = KeyAPI.Signature(signature_bytes=sig[:64] + bytes([sig[64] - 27]))
    assert recovered.recover_public_key_from_msg_hash(signing).to_address().lower() == case["signer"]
    # RFC 6979 signatures are deterministic: signing again gives the stored bytes.
    again = Account.sign_typed_data(case["private_key"], full_message=afr.eip712_typed_data(st))
    assert bytes(again.signature) == sig
    assert bytes(again.message_hash) == signing


def _enc_string(s):
    return keccak(s.encode("utf-8"))


@by_name("eip712")
def test_eip712_by_hand(case):
    """hashStruct and the domain separator spelled out from EIP-712, with only keccak256: checks
    that the typed data given to eth-account is the spec's (type strings, field order, types)."""
    st = case["statement"]
    domain_type = b"EIP712Domain(string name,string version)"
    domain = keccak(keccak(domain_type) + _enc_string("Agent Flight Recorder") + _enc_string("1"))
    assert "0x" + domain.hex() == case["domain_separator"]
    approval_type = (
        b"AfrApproval(bytes32 action,string tool,string target,string decision,"
        b"address recorder,uint64 issuedAt,uint64 expiresAt,bytes32 nonce)"
    )
    struct = keccak(
        keccak(approval_type)
        + bytes.fromhex(st["action"])
        + _enc_string(st["tool"])
        + _enc_string(st["target"])
        + _enc_string(st["decision"])
        + bytes(12) + bytes.fromhex(st["recorder"][2:])
        + st["issued_at"].to_bytes(32, "big")
        + st["expires_at"].to_bytes(32, "big")
        + bytes.fromhex(st["nonce"])
    )
    assert "0x" + struct.hex() == case["struct_hash"]


@by_name("eip712")
def test_eip712_tampered_statement_recovers_another_signer(case):
    st = dict(case["statement"], decision="rejected" if case["statement"]["decision"] == "approved" else "approved")
    sig = bytes.fromhex(case["signature"][2:])
    assert Account.recover_message(afr.eip712_signable(st), signature=sig).lower() != case["signer"]


# ---------------------------------------------------------------------------------------------
# §2.2 OpenSSH signatures


@by_name("ssh")
def test_ssh_message_from_statement(case):
    assert afr.ssh_message(case["statement"]) == case["message"]
    lines = case["message"].split("\n")
    assert len(lines) == 10 and lines[-1] == ""  # nine lines, each ending in \n
    assert lines[0] == "afr-approval-v1"
    assert [line.split(": ", 1)[0] for line in lines[1:-1]] == [
        "action", "tool", "target", "decision", "recorder", "issued-at", "expires-at", "nonce",
    ]
    assert json.loads(lines[2][len("tool: "):]) == case["statement"]["tool"]
    assert json.loads(lines[3][len("target: "):]) == case["statement"]["target"]


@by_name("ssh")
def test_ssh_signature_verifies(case):
    assert case["signature"].startswith("-----BEGIN SSH SIGNATURE-----\n")
    assert case["signature"].endswith("-----END SSH SIGNATURE-----\n")
    assert len(case["signer"].split(" ")) == 2 and case["signer"].split(" ")[0] == case["key_type"]
    ok, out = afr.ssh_verify(case["signer"], case["signature"], case["message"])
    assert ok, out


@by_name("ssh")
def test_ssh_signer_is_the_key_inside(case):
    fields = afr.sshsig_fields(case["signature"])
    assert fields["version"] == 1
    assert fields["namespace"] == b"afr-approval-v1"
    assert fields["hash_algorithm"] == b"sha512"
    assert afr.ssh_signer_of(case["signature"]) == case["signer"]


@by_name("ssh")
def test_ssh_tampered_message_fails(case):
    message = case["message"]
    # One changed character: the last hex digit of the action digest.
    i = message.index("action: ") + len("action: ") + 63
    tampered = message[:i] + ("0" if message[i] != "0" else "1") + message[i + 1:]
    assert len(tampered) == len(message) and tampered != message
    ok, out = afr.ssh_verify(case["signer"], case["signature"], tampered)
    assert not ok, out
    # So does the message with the other decision, and the right message in another namespace.
    other = "rejected" if case["statement"]["decision"] == "approved" else "approved"
    flipped = afr.ssh_message(dict(case["statement"], decision=other))
    assert not afr.ssh_verify(case["signer"], case["signature"], flipped)[0]
    assert not afr.ssh_verify(case["signer"], case["signature"], message, namespace="file")[0]


@by_name("ssh")
def test_ssh_other_key_fails(case):
    other = next(c for c in VECTORS["ssh"] if c["signer"] != case["signer"])
    assert not afr.ssh_verify(other["signer"], case["signature"], case["message"])[0]


# ---------------------------------------------------------------------------------------------
# The JSON-string rule of §2.2


def rule_json_string(s):
    """The spec's rule, spelled out character by character."""
    short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    out = []
    for ch in s:
        if ch in short:
            out.append(short[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


SAMPLE_CHARS = [chr(c) for c in range(0x80)] + [
    "\u0080", "\u009f", "\u00a0", "é", "\u2028", "\u2029", "\ufeff", "\ufffd", "日", "😀", "\U0010ffff",
]


@pytest.mark.parametrize("ch", SAMPLE_CHARS, ids=[f"U+{ord(c):04X}" for c in SAMPLE_CHARS])
def test_json_string_rule_per_character(ch):
    assert afr.json_string(ch) == rule_json_string(ch)
    assert afr.json_string("a" + ch + "b") == rule_json_string("a" + ch + "b")
    assert json.loads(afr.json_string(ch)) == ch


def test_json_string_rule_examples():
    assert afr.json_string("\x7f") == '"\x7f"'  # DEL is written as itself
    assert afr.json_string("\u2028\u2029") == '"\u2028\u2029"'  # so are the line separators
    assert afr.json_string("\x1f\x00\x0b") == '"\\u001f\\u0000\\u000b"'  # lower-case hex
    assert afr.json_string('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    assert afr.json_string("/") == '"/"'  # solidus not escaped
    assert afr.json_string("naïve 日本") == '"naïve 日本"'


def test_json_string_rule_on_vector_strings():
    for st in _statements():
        for f in ("tool", "target"):
            assert afr.json_string(st[f]) == rule_json_string(st[f])
            assert "\n" not in afr.json_string(st[f])


def test_a_tool_name_cannot_forge_a_line():
    st = dict(VECTORS["ssh"][0]["statement"], tool='x"\ndecision: approved\nrecorder: 0x00')
    lines = afr.ssh_message(st).split("\n")
    assert len(lines) == 10 and [line for line in lines if line.startswith("decision: ")] == [
        f"decision: {st['decision']}"
    ]
