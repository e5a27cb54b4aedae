#!/usr/bin/env bash
# Copies AfrAnchor's ABI and bytecode from `forge build` into anchorer/artifacts/AfrAnchor.json,
# the one contract artifact the repository ships (the Rust anchorer embeds it with alloy's sol!).
#
#   scripts/sync-artifact.sh          rebuild and rewrite the checked-in artifact
#   scripts/sync-artifact.sh --check  rebuild and fail if the checked-in artifact differs
#
# Only the stable parts of forge's artifact are kept: abi, bytecode.object,
# deployedBytecode.object and methodIdentifiers. Source maps, AST and metadata carry compiler
# source ids that change with whatever else was compiled alongside. Bytecode is deterministic
# because foundry.toml sets bytecode_hash = "none" and cbor_metadata = false.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/scripts/install-tools.sh"
target=anchorer/artifacts/AfrAnchor.json

"$root/.tools/bin/forge" build --quiet
fresh="$(mktemp)"
trap 'rm -f "$fresh"' EXIT
python3 - contracts/out/AfrAnchor.sol/AfrAnchor.json "$fresh" <<'PY'
import json, sys
src, dst = sys.argv[1], sys.argv[2]
a = json.load(open(src))
out = {
    "abi": a["abi"],
    "bytecode": {"object": a["bytecode"]["object"]},
    "deployedBytecode": {"object": a["deployedBytecode"]["object"]},
    "methodIdentifiers": a["methodIdentifiers"],
}
with open(dst, "w") as f:
    json.dump(out, f, indent=2, sort_keys=True)
    f.write("\n")
PY

if [[ "${1:-}" == "--check" ]]; then
    if ! cmp -s "$fresh" "$target"; then
        echo "sync-artifact: $target is stale (or missing): the contract changed since it was" >&2
        echo "sync-artifact: last synced. Run scripts/sync-artifact.sh and commit the result." >&2
        diff "$target" "$fresh" 2>&1 | head -n 20 | cut -c1-200 >&2 || true
        exit 1
    fi
    echo "sync-artifact: $target is up to date"
else
    mkdir -p "$(dirname "$target")"
    cat "$fresh" >"$target"
    echo "sync-artifact: wrote $target"
fi
