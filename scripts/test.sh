#!/usr/bin/env bash
# The project's whole test suite, from a fresh clone: set-up, Solidity checks, Rust checks, the
# Python client's tests against a real `afr serve`, the signed-approval test vectors
# (docs/spec/approval-vectors.json) re-checked with independent tools, the OTLP receiver under
# real agent frameworks (tests/frameworks/), and the coding-agent CLIs
# (Claude Code, Codex, Gemini CLI) against tests/agents/'s model server: one scripted session
# each, then AFR end to end with each of them (`afr setup`, hooks, gateway, approvals, recovery).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
step() { echo "== $*" >&2; }

step "set-up"
scripts/setup.sh

step "set-up's libclang detection (stubbed machine states, private mount namespace)"
scripts/test-setup.sh

step "contracts"
scripts/test-contracts.sh

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy (a cold first build compiles RocksDB's C++: about 10 minutes on 2 cores; the whole run about 21 minutes cold)"
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "cargo test"
cargo test --workspace --quiet

step "python client: pytest against a real afr serve (clients/python/)"
target="${CARGO_TARGET_DIR:-target}"
[[ "$target" == /* ]] || target="$root/$target"
# The debug `afr` that `cargo test --workspace` built.
AFR_BIN="$target/debug/afr" PYTHONDONTWRITEBYTECODE=1 \
    .venv/bin/python -m pytest -p no:cacheprovider -q clients/python

step "signed-approval test vectors: re-checked with cbor2, eth-account and ssh-keygen (tests/approvals/)"
AFR_BIN="$target/debug/afr" PYTHONDONTWRITEBYTECODE=1 \
    .venv/bin/python -m pytest -p no:cacheprovider -q tests/approvals

step "OTLP receiver under real agent frameworks: LangGraph (OpenInference, OpenLLMetry), smolagents, openai-agents with a handoff, on a scripted model (tests/frameworks/; about 10 s)"
AFR_BIN="$target/debug/afr" PYTHONDONTWRITEBYTECODE=1 \
    tests/frameworks/.venv/bin/python -m pytest -p no:cacheprovider -q tests/frameworks

step "witness: afr witness serve driven by an independent tlog-witness client, PyPI aics-witness (tests/witness/; about 1 s)"
AFR_BIN="$target/debug/afr" PYTHONDONTWRITEBYTECODE=1 \
    tests/witness/.venv/bin/python -m pytest -p no:cacheprovider -q tests/witness

step "coding-agent CLIs: one scripted session each, seen by the capture hook (tests/agents/test_harness.py; about 10 s)"
PYTHONDONTWRITEBYTECODE=1 .venv/bin/python -m pytest -p no:cacheprovider -q tests/agents/test_harness.py

step "coding-agent CLIs end to end with AFR: afr setup, hooks through afr serve, the MCP gateway, approvals, a killed CLI recovered, OTLP logs beside the hooks, the paper's DROP SCHEMA anchored and verified (tests/agents/test_afr_e2e.py; about 45 s)"
AFR_BIN="$target/debug/afr" PYTHONDONTWRITEBYTECODE=1 \
    .venv/bin/python -m pytest -p no:cacheprovider -q tests/agents/test_afr_e2e.py
