#!/usr/bin/env bash
# A cross-organisation dispute, end to end on a local anvil chain (docs/disputes.md).
#
# Acme's orchestrator delegates "purge expired sessions in staging" to Globex's database agent
# through the delegation handshake (each side records the other's signed receipt); Globex's
# agent then deletes every session in production. Both organisations anchor their logs on the
# same contract with their own keys. An arbiter gets each side's disclosure of the delegation
# chain and checks them together with `afr-verify case`: verified, with the chain across both
# organisations. Then Globex tries to deny: it withholds the event Acme holds its receipt for
# (incomplete), and it hands over a rewritten history (tampered). Does its own set-up.
set -euo pipefail
# shellcheck source=scripts/lib/demo-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/demo-common.sh"
show() { printf '\n$ %s\n' "$*" >&2; "$@"; }

step 1/9 "set-up and build (release; quick when already done)"
scripts/setup.sh
cargo build --release --quiet -p afr-cli -p afr-verify
release_binaries

start_anvil
# Anvil's first two dev accounts: Acme's and Globex's anchoring keys (on this local chain only).
acme_key=0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80
globex_key=0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d
acme() { AFR_ANCHOR_KEY="$acme_key" "$afr" --dir "$work/acme" "$@"; }
globex() { AFR_ANCHOR_KEY="$globex_key" "$afr" --dir "$work/globex" "$@"; }
json() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

step 2/9 "two organisations, two recorders"
acme init
globex init

step 3/9 "the delegation handshake: Acme offers, Globex accepts, Acme records Globex's receipt"
cat >"$work/offer-event.json" <<'EOF'
{"category":"delegation","lane":"ops-42","intent":{"tool":"delegate_task","args":{"to":"globex/dba-agent","task":"purge sessions that expired more than 30 days ago","environment":"staging"}},
 "code_provenance":{"agent":"acme-orchestrator","agent_version":"3.2.0"},
 "delegation_provenance":{"organisation":"Acme Corp","on_behalf_of":"ticket OPS-42"}}
EOF
cat >"$work/accept-event.json" <<'EOF'
{"category":"delegation","lane":"job-7","intent":{"tool":"accept_task","args":{"task":"purge sessions that expired more than 30 days ago","environment":"staging"}},
 "code_provenance":{"agent":"globex-dba-agent","agent_version":"0.9.1"},
 "delegation_provenance":{"delegating_agent":"acme-orchestrator","organisation":"Acme Corp"}}
EOF
globex_id="$(globex status --json | json '["recorder"]')"
show acme delegate offer "$work/offer-event.json" --to "$globex_id" | tee "$work/offer.json"
show globex delegate accept "$work/accept-event.json" --parent "$work/offer.json" | tee "$work/accepted.json"
show acme delegate receipt --offer "$work/offer.json" --receipt "$work/accepted.json" >/dev/null
accepted_seq="$(json '["seq"]' <"$work/accepted.json")"

step 4/9 "Globex's agent goes on under the task, and deletes every session in production"
cat >"$work/delete.json" <<EOF
{"category":"database","lane":"job-7","intent":{"tool":"psql","args":{"database":"sessions","sql":"DELETE FROM sessions"}},
 "execution":{"command":"psql -h db.prod.globex.internal -c 'DELETE FROM sessions'","target":"db.prod.globex.internal"},
 "effects":{"state_changes":["deleted 1,204,331 rows from sessions"]},
 "context_provenance":{"environment":"production"},
 "delegation_provenance":{"parent_event":{"seq":$accepted_seq}}}
EOF
# `afr record` reads one event per line.
tr -d '\n' <"$work/delete.json" >"$work/delete.jsonl"
globex record "$work/delete.jsonl"
acme seal
globex seal

step 5/9 "both anchor on one contract, each with its own key"
wait_for_anvil
contract="$(acme deploy --rpc "$rpc" --json | json '["contract"]')"
acme anchor --rpc "$rpc" --contract "$contract"
globex anchor --rpc "$rpc" --contract "$contract"
acme_rec="$(acme status --json | json '["recorder"]')"
globex_rec="$(globex status --json | json '["recorder"]')"

step 6/9 "each side discloses its half of the delegation chain, with keys"
offer_seq="$(json '["seq"]' <"$work/offer.json")"
acme disclose --chain "$offer_seq" --with-keys --out "$work/acme.bundle"
globex disclose --chain "$accepted_seq" --with-keys --out "$work/globex.bundle"

step 7/9 "the arbiter pins both recorders and checks the case against the chain"
cat >"$work/case.toml" <<EOF
chain_id = 31337
contract = "$contract"

[[party]]
name = "Acme Corp (delegating)"
recorders = ["$acme_rec"]
bundles = ["acme.bundle"]

[[party]]
name = "Globex Ltd (receiving)"
recorders = ["$globex_rec"]
bundles = ["globex.bundle"]
EOF
show "$verify" case "$work/case.toml" --rpc "$rpc"
show acme query "descendants($offer_seq)" --bundle "$work/globex.bundle"

# The case as the arbiter keeps it: the bundles, each recorder's anchors read once from the
# chain, and a case file naming them, in demo-out/dispute/; its report re-verifies offline.
demo_out
case_dir="$out/dispute"
mkdir -p "$case_dir"
cp "$work/acme.bundle" "$work/globex.bundle" "$case_dir/"
for who in acme:"$acme_rec" globex:"$globex_rec"; do
    "$verify" anchors --rpc "$rpc" --chain-id 31337 --contract "$contract" --recorder "${who#*:}" \
        --out "$case_dir/${who%%:*}.anchors.json" >/dev/null
done
sed -e 's/^bundles = \["acme.bundle"\]$/&\nanchors = ["acme.anchors.json"]/' \
    -e 's/^bundles = \["globex.bundle"\]$/&\nanchors = ["globex.anchors.json"]/' \
    "$work/case.toml" >"$case_dir/case.toml"
report_flags "$out/dispute-report"
"$verify" case "$case_dir/case.toml" "${report[@]}" >/dev/null

step 8/9 "Globex denies: it withholds the accepting event Acme holds its receipt for"
globex disclose --seq "$((accepted_seq + 1))" --with-keys --out "$work/globex.bundle"
if show "$verify" case "$work/case.toml" --rpc "$rpc"; then
    echo "demo: a withheld delegated event verified; this is a bug" >&2; exit 1
fi

step 9/9 "Globex denies again: a rewritten history, the task re-recorded as production"
sed 's/"environment":"staging"/"environment":"production"/' "$work/accept-event.json" | tr -d '\n' >"$work/rewritten.jsonl"
AFR_ANCHOR_KEY="$globex_key" "$afr" --dir "$work/globex-rewritten" init
AFR_ANCHOR_KEY="$globex_key" "$afr" --dir "$work/globex-rewritten" record "$work/rewritten.jsonl"
AFR_ANCHOR_KEY="$globex_key" "$afr" --dir "$work/globex-rewritten" record "$work/delete.jsonl"
AFR_ANCHOR_KEY="$globex_key" "$afr" --dir "$work/globex-rewritten" seal
AFR_ANCHOR_KEY="$globex_key" "$afr" --dir "$work/globex-rewritten" disclose --seq 0-1 --with-keys --out "$work/globex.bundle"
if show "$verify" case "$work/case.toml" --rpc "$rpc"; then
    echo "demo: a rewritten history verified; this is a bug" >&2; exit 1
fi
printf '\n\033[1mdone:\033[0m the honest case verified across both organisations; the withheld event answered incomplete and the rewritten history tampered.\n'
printf 'case report: %s\n' "$out/dispute-report.html"
