#!/usr/bin/env bash
# Installs what a fresh machine lacks: libclang (RocksDB's bindgen) from Debian, and the pinned
# Solidity toolchain from npm (scripts/install-tools.sh). Idempotent and quick when done.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if ! ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 && ! ldconfig -p 2>/dev/null | grep -q libclang; then
    echo "setup: installing libclang-dev (needed to build RocksDB)" >&2
    sudo_cmd=""
    [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq libclang-dev >/dev/null
fi
command -v cargo >/dev/null || { echo "setup: cargo (Rust) is required" >&2; exit 1; }
"$root/scripts/install-tools.sh"
