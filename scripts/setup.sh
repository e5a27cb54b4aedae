#!/usr/bin/env bash
# Installs what a fresh machine lacks: libclang (RocksDB's bindgen) from Debian, the pinned
# Solidity toolchain from npm (scripts/install-tools.sh), pinned pytest and the pinned PyPI `mcp`
# SDK (tests/mcp/requirements.txt) from PyPI in .venv/ (the Python client's tests, the MCP
# gateway's Python peers), the pinned MCP reference servers and TypeScript client from npm in
# tests/mcp/ (the MCP gateway's tests), and the pinned OpenTelemetry JS SDK and OTLP/HTTP exporter
# from npm in tests/otlp/ (the OTLP receiver's tests), the pinned coding-agent CLIs (Claude Code,
# Codex, Gemini CLI; about 900 MB) from npm in tests/agents/ (their hooks and OTel logs, run offline
# against a scripted model server), the pinned agent frameworks and their OTel instrumentations
# from PyPI in tests/frameworks/.venv/ (the OTLP receiver's framework tests), and pinned
# eth-account and cbor2 from PyPI
# in .venv/ with OpenSSH's ssh-keygen from Debian (tests/approvals/: the signed-approval test
# vectors), and Debian's headless Chromium (the evidence report's tests). Idempotent and quick
# when done.
#
# libclang detection asks what bindgen (clang-sys) would load, not whether some library with
# "clang" in its name exists: Debian images often carry libclang-cpp (the C++ API, useless to
# bindgen) without libclang itself. bindgen also needs clang's resource headers (stddef.h), which
# Debian ships in the libclang-N-dev packages, so on Debian the -dev package must be installed too.
# scripts/test-setup.sh checks this against stubbed machine states.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# A file bindgen can load: libclang.so, libclang.so.N, libclang-N.so or libclang-N.so.M.
is_libclang_name() { [[ "$1" =~ ^libclang(-[0-9][0-9.]*)?\.so(\.[0-9.]+)?$ ]]; }

libclang_loadable() {
    local f
    if [[ -n "${LIBCLANG_PATH:-}" ]]; then
        # bindgen looks only there when it is set; so do we.
        for f in "$LIBCLANG_PATH"/libclang*.so*; do
            [[ -f "$f" ]] && is_libclang_name "$(basename "$f")" && return 0
        done
        return 1
    fi
    for f in /usr/lib/llvm-*/lib/libclang*.so* /usr/lib/x86_64-linux-gnu/libclang*.so* /usr/lib/aarch64-linux-gnu/libclang*.so* /usr/lib64/libclang*.so* /usr/local/lib/libclang*.so*; do
        [[ -f "$f" ]] && is_libclang_name "$(basename "$f")" && return 0
    done
    local name
    while read -r name _; do
        is_libclang_name "$name" && return 0
    done < <(ldconfig -p 2>/dev/null | sed -n 's/^[[:space:]]*\(libclang[^ ]*\).*/\1/p')
    return 1
}

# On Debian: is libclang-dev or a versioned libclang-N-dev installed?
debian_clang_dev_installed() {
    # Read the whole answer first: `dpkg-query | grep -q` fails under pipefail whenever grep
    # stops reading before dpkg-query has written everything (SIGPIPE).
    local installed
    installed="$(dpkg-query -W -f='${Package} ${Status}\n' 'libclang-dev' 'libclang-*-dev' 2>/dev/null || true)"
    grep -Eq '^libclang(-[0-9]+)?-dev install ok installed$' <<<"$installed"
}

libclang_ready() {
    libclang_loadable || return 1
    if [[ -z "${LIBCLANG_PATH:-}" ]] && command -v dpkg-query >/dev/null; then
        debian_clang_dev_installed || return 1
    fi
    return 0
}

if [[ -n "${LIBCLANG_PATH:-}" ]] && ! libclang_loadable; then
    echo "setup: LIBCLANG_PATH=$LIBCLANG_PATH holds no libclang.so or libclang-N.so that bindgen can load; fix or unset it" >&2
    exit 1
fi
if ! libclang_ready; then
    echo "setup: installing libclang-dev from Debian (bindgen needs libclang to build RocksDB)" >&2
    command -v apt-get >/dev/null || {
        echo "setup: no libclang that bindgen can load, and no apt-get to install it; install libclang (or set LIBCLANG_PATH) and re-run" >&2
        exit 1
    }
    sudo_cmd=()
    [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq libclang-dev >/dev/null
    libclang_ready || { echo "setup: libclang-dev installed, but no loadable libclang was found afterwards" >&2; exit 1; }
fi
command -v cargo >/dev/null || { echo "setup: cargo (Rust) is required" >&2; exit 1; }
"$root/scripts/install-tools.sh"

# pytest for clients/python/, pinned with its dependencies, and the MCP SDK for the gateway's
# Python peers (tests/mcp/requirements.txt, every dependency pinned), in one project virtualenv.
# The marker holds the pins and the requirements file's sha256, so editing either reinstalls.
# Skipped in a checkout with neither clients/python/ nor tests/mcp/requirements.txt
# (scripts/test-setup.sh runs copies of this script alone).
PYTHON_PINS=(pytest==9.2.0 iniconfig==2.3.1 packaging==26.4 pluggy==1.7.0 pygments==2.21.0)
venv="$root/.venv"
mcp_reqs="$root/tests/mcp/requirements.txt"
python_want="${PYTHON_PINS[*]}"
python_check='import pytest'
pip_args=("${PYTHON_PINS[@]}")
python_what="${PYTHON_PINS[*]}"
# Adds a pinned requirements file (its sha256 goes into the marker, so editing it reinstalls)
# and the imports that show it is installed.
add_requirements() {
    local file="$1" name="$2" imports="$3"
    [[ -f "$file" ]] || return 0
    python_want+=" $name-requirements-sha256=$(sha256sum "$file" | cut -d' ' -f1)"
    python_what+=" and ${file#"$root"/}"
    python_check+="; import $imports"
    pip_args+=(-r "$file")
}
add_requirements "$mcp_reqs" mcp mcp
# The OpenTelemetry SDK, exporters and Pydantic AI for the OTLP receiver's peers (its shared
# pins agree with tests/mcp/requirements.txt).
otlp_reqs="$root/tests/otlp/requirements.txt"
add_requirements "$otlp_reqs" otlp "opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http, opentelemetry.exporter.otlp.proto.grpc, pydantic_ai"
# eth-account and cbor2, the independent tools behind the signed-approval test vectors
# (docs/spec/approval-vectors.json; scripts/approval-vectors.py, tests/approvals/); their shared
# pins agree with the two files above.
add_requirements "$root/tests/approvals/requirements.txt" approvals "eth_account, cbor2"
# rfc3161-client, the independent RFC 3161 verifier that afr-tsa's tests check tokens with
# (tests/tsa/check_rfc3161.py); its shared pins agree with tests/mcp/requirements.txt.
add_requirements "$root/tests/tsa/requirements.txt" tsa rfc3161_client
if [[ -d "$root/clients/python" || -f "$mcp_reqs" || -f "$otlp_reqs" || -f "$root/tests/approvals/requirements.txt" || -f "$root/tests/tsa/requirements.txt" ]] &&
    ! { [[ -f "$venv/.installed" && "$(cat "$venv/.installed")" == "$python_want" ]] &&
        "$venv/bin/python" -c "$python_check" 2>/dev/null; }; then
    command -v python3 >/dev/null || { echo "setup: python3 is required (clients/python/ and tests/mcp/ tests)" >&2; exit 1; }
    echo "setup: installing $python_what into .venv/ from PyPI" >&2
    if ! python3 -m venv --clear "$venv" >/dev/null 2>&1; then
        # Debian's python3 has no ensurepip without python3-venv.
        command -v apt-get >/dev/null || { echo "setup: python3 cannot create a virtualenv (python3 -m venv); install its venv module and re-run" >&2; exit 1; }
        sudo_cmd=()
        [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
        "${sudo_cmd[@]}" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq python3-venv >/dev/null
        python3 -m venv --clear "$venv"
    fi
    "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q "${pip_args[@]}"
    echo "$python_want" >"$venv/.installed"
fi

# The agent frameworks of the OTLP receiver's framework tests (LangGraph with both LangChain
# instrumentations, smolagents, openai-agents; tests/frameworks/requirements.txt, every
# dependency pinned) in their own virtualenv, tests/frameworks/.venv (about 260 MB, 30 s cold):
# their pins are not the project venv's. Reinstalled when the requirements file changes.
fw_reqs="$root/tests/frameworks/requirements.txt"
fw_venv="$root/tests/frameworks/.venv"
if [[ -f "$fw_reqs" ]]; then
    fw_want="frameworks-requirements-sha256=$(sha256sum "$fw_reqs" | cut -d' ' -f1)"
    fw_check='import pytest, langgraph, langchain, smolagents, agents, openinference.instrumentation.langchain, opentelemetry.instrumentation.langchain, openinference.instrumentation.smolagents, openinference.instrumentation.openai_agents, opentelemetry.exporter.otlp.proto.http'
    if ! { [[ -f "$fw_venv/.installed" && "$(cat "$fw_venv/.installed")" == "$fw_want" ]] &&
        "$fw_venv/bin/python" -c "$fw_check" 2>/dev/null; }; then
        echo "setup: installing tests/frameworks/requirements.txt (LangGraph, smolagents, openai-agents and their instrumentations) into tests/frameworks/.venv/ from PyPI" >&2
        python3 -m venv --clear "$fw_venv"
        "$fw_venv/bin/python" -m pip install --disable-pip-version-check --no-input -q -r "$fw_reqs"
        echo "$fw_want" >"$fw_venv/.installed"
    fi
fi

# An independent tlog-witness client for afr witness serve's test (tests/witness/requirements.txt:
# the aics-witness feeder and aics-tlog, every dependency pinned) in its own virtualenv,
# tests/witness/.venv: they declare Python >= 3.12 but run on 3.11, and --ignore-requires-python
# must not reach any other install.
wit_reqs="$root/tests/witness/requirements.txt"
wit_venv="$root/tests/witness/.venv"
if [[ -f "$wit_reqs" ]]; then
    wit_want="witness-requirements-sha256=$(sha256sum "$wit_reqs" | cut -d' ' -f1)"
    if ! { [[ -f "$wit_venv/.installed" && "$(cat "$wit_venv/.installed")" == "$wit_want" ]] &&
        "$wit_venv/bin/python" -c 'import pytest, aics_tlog, aics_witness.feeder' 2>/dev/null; }; then
        echo "setup: installing tests/witness/requirements.txt (aics-witness, aics-tlog) into tests/witness/.venv/ from PyPI" >&2
        python3 -m venv --clear "$wit_venv"
        "$wit_venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
            --ignore-requires-python -r "$wit_reqs"
        echo "$wit_want" >"$wit_venv/.installed"
    fi
fi

# Installs Debian package $1 (what it is for: $2) with apt-get, as root or through sudo.
apt_install() {
    command -v apt-get >/dev/null || { echo "setup: $2 needs Debian's $1 (or its equivalent); install it and re-run" >&2; exit 1; }
    local sudo_cmd=()
    [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
    echo "setup: installing $1 from Debian ($2)" >&2
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "$1" >/dev/null
}

# OpenSSH's ssh-keygen (Debian's openssh-client) signs and verifies the SSH test vectors of signed
# approvals (scripts/approval-vectors.py, tests/approvals/).
if [[ -f "$root/tests/approvals/requirements.txt" ]] && ! command -v ssh-keygen >/dev/null; then
    apt_install openssh-client "ssh-keygen, for tests/approvals/"
fi

# The openssl command makes the private CA and certificate of the MCP gateway's TLS-upstream
# test (cli/tests/it/mcp_peers.rs), and is the real RFC 3161 TSA of afr-tsa's tests
# (`openssl ts -reply` behind tests/tsa/tsa_shim.py; tsa/testdata/gen.sh).
if ! command -v openssl >/dev/null; then
    apt_install openssl "openssl, for the gateway's TLS-upstream test and the TSA tests"
fi

# Headless Chromium (Debian's chromium) renders the evidence report in its tests (screenshots,
# the DOM as a reader sees it) and prints it to PDF (`afr-verify ... --pdf`).
if ! command -v chromium >/dev/null; then
    apt_install chromium "headless Chromium, for the evidence report's tests and --pdf"
fi

# npm peers, each pinned exactly in its package-lock.json and installed with `npm ci` into its
# node_modules/ (gitignored); skipped when the stamp there matches the lock file:
# - tests/mcp/: the reference MCP servers the gateway's tests run against (cli/tests/it/mcp.rs)
#   and the TypeScript client SDK (tests/mcp/ts_client.mjs);
# - tests/otlp/: the OpenTelemetry JS SDK and its OTLP/HTTP (JSON) trace exporter
#   (tests/otlp/emit_js.mjs, cli/tests/it/otlp.rs);
# - tests/hardhat/: Hardhat Network (EDR), a second Ethereum node implementation whose JSON-RPC
#   serves no raw transactions and no block receipts (verifier/tests/it/hardhat.rs);
# - tests/agents/: Claude Code, Codex and Gemini CLI, run headless against tests/agents/model_server.py
#   (tests/agents/agents.py, tests/agents/test_harness.py).
npm_ci() {
    local dir="$1" what="$2" lock_hash
    [[ -f "$dir/package-lock.json" ]] || return 0
    lock_hash="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
    if [[ ! -f "$dir/node_modules/.afr-installed" || "$(cat "$dir/node_modules/.afr-installed")" != "$lock_hash" ]]; then
        command -v npm >/dev/null || { echo "setup: npm (Node.js >= 20) is required for $what" >&2; exit 1; }
        echo "setup: installing $what into ${dir#"$root"/}/node_modules/ (npm ci)" >&2
        (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
        echo "$lock_hash" >"$dir/node_modules/.afr-installed"
    fi
}
npm_ci "$root/tests/mcp" "the pinned MCP reference servers and client"
npm_ci "$root/tests/otlp" "the pinned OpenTelemetry JS SDK and OTLP exporter"
npm_ci "$root/tests/hardhat" "the pinned Hardhat Network, a second Ethereum node beside anvil"
# Claude Code's postinstall (npm ci runs it) copies its ~400 MB native binary from
# @anthropic-ai/claude-code-linux-x64 over the bin/claude.exe stub. Should the stub be left (scripts
# skipped, an interrupted copy), its own install.cjs does the copy again; `--version` is quick
# on the native binary, so this check costs nothing once installed.
npm_ci "$root/tests/agents" "the pinned coding-agent CLIs (Claude Code, Codex, Gemini CLI)"
claude_pkg="$root/tests/agents/node_modules/@anthropic-ai/claude-code"
if [[ -f "$claude_pkg/install.cjs" ]] && ! "$claude_pkg/bin/claude.exe" --version >/dev/null 2>&1; then
    echo "setup: copying Claude Code's native binary into place (node install.cjs)" >&2
    (cd "$claude_pkg" && node install.cjs >/dev/null)
    "$claude_pkg/bin/claude.exe" --version >/dev/null 2>&1 ||
        { echo "setup: Claude Code's native binary does not run after node install.cjs (tests/agents/)" >&2; exit 1; }
fi
