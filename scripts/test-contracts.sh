#!/usr/bin/env bash
# Checks the Solidity side: formatting, build, the shipped artifact, tests and the gas snapshot.
# Uses only the pinned tools in .tools/bin (installed first if missing; fast when present).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/scripts/install-tools.sh"
forge="$root/.tools/bin/forge"

# Fuzz and invariant tests stay out of the gas snapshot: their figures are averages over
# generated inputs, which any change to the fuzz configuration would move.
SNAPSHOT_FILTER=(--no-match-test 'testFuzz|invariant')

step() { echo "== $*" >&2; }

step "forge fmt --check"
"$forge" fmt --check

step "forge build"
"$forge" build

step "inclusion cases match scripts/gen-inclusion-cases.py"
python3 "$root/scripts/gen-inclusion-cases.py" --check

step "anchorer/artifacts/AfrAnchor.json matches the build"
"$root/scripts/sync-artifact.sh" --check

step "forge test"
"$forge" test

step "forge snapshot --check (.gas-snapshot)"
"$forge" snapshot --check "${SNAPSHOT_FILTER[@]}"
