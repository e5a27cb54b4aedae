#!/usr/bin/env bash
# The main job: a full record → seal → anchor → verify run on a local anvil chain.
#
# Records a realistic incident (docs/examples/incident.jsonl) plus a synthetic background
# workload, seals it into epochs, exports the log, deploys the real AfrAnchor contract on a
# fresh anvil with `afr deploy`, anchors every epoch root with `afr anchor`, verifies the export
# with `afr-verify` against the roots it reads back by eth_call, answers the investigator's
# questions with `afr query` (the destructive call, its guardrails, who approved and delegated
# it, what it read), discloses the incident's events with their keys and verifies that bundle
# against the chain, then tampers a copy of the log and shows the verifier catching it, and ends
# by writing the evidence report (HTML, and PDF where Chromium is installed) into demo-out/
# (or $AFR_DEMO_OUT) and printing its path. Does its own set-up on a fresh machine.
set -euo pipefail
# shellcheck source=scripts/lib/demo-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/demo-common.sh"

step 1/11 "set-up (libclang, pinned Foundry from npm; quick when already done)"
scripts/setup.sh
step 2/11 "build (release; a cold first build compiles RocksDB's C++ and takes about 14 minutes on 2 cores, later runs seconds)"
cargo build --release --quiet -p afr-cli -p afr-verify -p afr-eval
release_binaries
"$bin/forge" build --quiet

start_anvil
# Anvil's first dev account: the recorder's anchoring identity on this local chain only.
pk=0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80

export AFR_ANCHOR_KEY="$pk"
step 3/11 "record the incident and 993 background tool calls (epochs of 100)"
"$afr" --dir "$work/afr" init
{ cat docs/examples/incident.jsonl; "$afr" gen --events 993 --seed 42; } > "$work/events.jsonl"
"$afr" --dir "$work/afr" record --epoch-size 100 "$work/events.jsonl"
"$afr" --dir "$work/afr" seal --epoch-size 100

step 4/11 "export the log"
"$afr" --dir "$work/afr" export --out "$work/log.afr"

step 5/11 "deploy AfrAnchor on a local anvil ($rpc) at its canonical CREATE2 address"
wait_for_anvil
contract="$("$afr" --dir "$work/afr" deploy --rpc "$rpc" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["contract"])')"
echo "contract $contract"

step 6/11 "anchor every sealed epoch root (32 bytes + back-pointer per epoch; no content on chain)"
"$afr" --dir "$work/afr" anchor --rpc "$rpc" --contract "$contract"
"$afr" --dir "$work/afr" anchor --rpc "$rpc" --contract "$contract"   # a second run posts nothing
"$afr" --dir "$work/afr" status

# What the other party pins, from sources other than the files: the chain, the contract (the
# canonical AfrAnchor address) and the recorder they know the operator records under.
recorder="$("$afr" --dir "$work/afr" status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["recorder"])')"
pins=(--rpc "$rpc" --chain-id 31337 --contract "$contract" --recorder "$recorder")

step 7/11 "afr-verify the exported log, pinning chain, contract and recorder (each root proven by the recorder's own transaction)"
"$verify" log "$work/log.afr" "${pins[@]}"

step 8/11 "investigate with structured queries over the recorder's store (docs/query.md)"
q() { printf "\n\$ afr query '%s'\n" "$1"; "$afr" --dir "$work/afr" query "$1"; }
q 'execution.command ~ "DROP"'                                       # what ran
q 'policy_evaluation[].guardrail exists and intent.args.sql ~ "DROP"' # which guardrails judged it
q 'ancestors(5)'                                                     # who delegated and approved it
q 'influences(2)'                                                    # what the agent had read

step 9/11 "disclose the incident's 7 events with their keys; verify the bundle against the chain, pinning the recorder"
"$afr" --dir "$work/afr" disclose --seq 0-6 --with-keys --out "$work/incident.bundle"
"$verify" bundle "$work/incident.bundle" "${pins[@]}"

step 10/11 "tamper a copy of the log (flip one bit inside the first epoch) and verify again"
python3 - "$work/log.afr" "$work/tampered.afr" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = len(b) // 20  # a byte inside the first epoch
b[i] ^= 0x01
open(sys.argv[2], "wb").write(b)
PY
if "$verify" log "$work/tampered.afr" "${pins[@]}"; then
    echo "demo: the tampered copy verified; this is a bug" >&2; exit 1
fi
step 11/11 "write the evidence report an arbiter reads (self-contained HTML; PDF through headless Chromium)"
# Kept in demo-out/ with the bundle and the anchors it was checked against, so that the report's
# re-verify commands still work offline once this chain is gone.
demo_out
cp "$work/incident.bundle" "$out/incident.bundle"
"$verify" anchors --rpc "$rpc" --chain-id 31337 --contract "$contract" --recorder "$recorder" \
    --out "$out/incident.anchors.json" >/dev/null
report_flags "$out/incident-report"
"$verify" bundle "$out/incident.bundle" --anchors "$out/incident.anchors.json" --chain-id 31337 \
    --contract "$contract" --recorder "$recorder" "${report[@]}" >/dev/null
printf '\n\033[1mdone:\033[0m honest log verified, every epoch root anchored and matched on chain, incident disclosed and verified, tampered copy caught.\n'
printf 'evidence report: %s\n' "$out/incident-report.html"
