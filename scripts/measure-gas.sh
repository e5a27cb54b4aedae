#!/usr/bin/env bash
# Measures whole-transaction gas (receipt gasUsed: 21,000 base + calldata + execution) of
# AfrAnchor on a local anvil: one epoch-0 anchor, steady-state anchors, one anchorBatch of 10.
# Starts anvil on a free port and always stops it again. Results go to docs/gas.md by hand.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/scripts/install-tools.sh"
bin="$root/.tools/bin"
STEADY=5
BATCH=10

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
rpc="http://127.0.0.1:$port"
# Anvil's well-known first dev account; it only ever holds test ether on this local node.
pk=0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80

"$bin/anvil" --port "$port" --silent &
anvil_pid=$!
trap 'kill "$anvil_pid" 2>/dev/null || true; wait "$anvil_pid" 2>/dev/null || true' EXIT

for _ in $(seq 100); do
    "$bin/cast" chain-id --rpc-url "$rpc" >/dev/null 2>&1 && break
    sleep 0.1
done
"$bin/cast" chain-id --rpc-url "$rpc" >/dev/null || { echo "measure-gas: anvil did not start" >&2; exit 1; }

# send SIG ARGS... -> prints the receipt's gasUsed
send() {
    local tx
    tx="$("$bin/cast" send --async --rpc-url "$rpc" --private-key "$pk" "$@")"
    "$bin/cast" receipt --rpc-url "$rpc" "$tx" status | grep -Eq '^(true|1)$' ||
        { echo "measure-gas: transaction $tx failed: $*" >&2; exit 1; }
    "$bin/cast" receipt --rpc-url "$rpc" "$tx" gasUsed
}

"$bin/forge" build --quiet
create_tx="$("$bin/cast" send --async --rpc-url "$rpc" --private-key "$pk" \
    --create "$("$bin/forge" inspect AfrAnchor bytecode)")"
anchor="$("$bin/cast" receipt --rpc-url "$rpc" "$create_tx" contractAddress)"
deploy_gas="$("$bin/cast" receipt --rpc-url "$rpc" "$create_tx" gasUsed)"

root_of() { "$bin/cast" keccak "afr-measure-root-$1"; } # any nonzero 32 bytes will do
back_pointer() { "$bin/cast" call --rpc-url "$rpc" "$anchor" "backPointer(bytes32)(bytes32)" "$1"; }
zero=0x0000000000000000000000000000000000000000000000000000000000000000

hardfork="$("$bin/cast" rpc --rpc-url "$rpc" anvil_nodeInfo | python3 -c 'import json, sys; print(json.load(sys.stdin)["hardFork"])')"
echo "anvil $("$bin/anvil" --version | head -n 1 | awk '{print $3}') ($hardfork), chain $("$bin/cast" chain-id --rpc-url "$rpc"), contract $anchor"
printf '%-34s %8s\n' "transaction" "gasUsed"
printf '%-34s %8s\n' "deploy AfrAnchor" "$deploy_gas"
printf '%-34s %8s\n' "anchor epoch 0" "$(send "$anchor" "anchor(uint64,bytes32,bytes32)" 0 "$(root_of 0)" "$zero")"
for e in $(seq 1 "$STEADY"); do
    printf '%-34s %8s\n' "anchor epoch $e (steady state)" \
        "$(send "$anchor" "anchor(uint64,bytes32,bytes32)" "$e" "$(root_of "$e")" "$(back_pointer "$(root_of $((e - 1)))")")"
done
first=$((STEADY + 1))
roots="$(for e in $(seq "$first" $((first + BATCH - 1))); do root_of "$e"; done | paste -sd, -)"
batch_gas="$(send "$anchor" "anchorBatch(uint64,bytes32[],bytes32)" "$first" "[$roots]" "$(back_pointer "$(root_of "$STEADY")")")"
printf '%-34s %8s (%s per epoch)\n' "anchorBatch epochs $first..$((first + BATCH - 1))" "$batch_gas" "$((batch_gas / BATCH))"
head="$("$bin/cast" call --rpc-url "$rpc" "$anchor" "head(address)(bool,uint64)" "$("$bin/cast" wallet address "$pk")" | paste -sd' ' -)"
echo "head(recorder) = $head"
