# Shared by scripts/demo.sh and scripts/demo-dispute.sh (sourced, not run): the repository
# root as the working directory, the pinned Foundry tools, step headings, the release
# binaries, and a throwaway anvil chain.

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
bin="$root/.tools/bin"

# A numbered step's heading: step 1/9 "what it does".
step() { printf '\n\033[1m[%s] %s\033[0m\n' "$1" "$2"; }

# Sets $afr and $verify to the release binaries (built by the caller).
release_binaries() {
    local target="${CARGO_TARGET_DIR:-$root/target}"
    afr="$target/release/afr"
    verify="$target/release/afr-verify"
}

# Starts anvil on a free local port ($rpc) with a scratch directory ($work); both go away
# when the script exits.
start_anvil() {
    work="$(mktemp -d)"
    local port
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    rpc="http://127.0.0.1:$port"
    "$bin/anvil" --port "$port" --silent &
    anvil_pid=$!
    trap 'kill "$anvil_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
}

# Waits (up to 10 s) until anvil answers on $rpc.
wait_for_anvil() {
    for _ in $(seq 100); do "$bin/cast" chain-id --rpc-url "$rpc" >/dev/null 2>&1 && break; sleep 0.1; done
}

# Sets $out: where a demo leaves what outlives it (the evidence, the anchors it was checked
# against, the report): demo-out/, or $AFR_DEMO_OUT.
demo_out() {
    out="${AFR_DEMO_OUT:-$root/demo-out}"
    mkdir -p "$out"
}

# Sets $report to the report flags for base path $1: --html $1.html, and --pdf $1.pdf when a
# renderer afr-verify can use is installed.
report_flags() {
    report=(--html "$1.html")
    if [[ -n "${AFR_CHROMIUM:-}" ]] || command -v chromium >/dev/null ||
        command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null; then
        report+=(--pdf "$1.pdf")
    fi
}
