#!/usr/bin/env bash
# Tests scripts/setup.sh's libclang detection against machine states it must tell apart.
#
# Each case runs a copy of setup.sh (with install-tools.sh stubbed out) in a private mount
# namespace where every real libclang*.so* on this machine is hidden (a bind mount of /dev/null
# over it, so it is no longer a regular file), and with `ldconfig`, `dpkg-query` and `apt-get`
# replaced by stubs on PATH that describe the machine state of the case. The apt-get stub logs
# its arguments; on `install` it flips the state to "libclang-dev installed", as the real one would.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [[ "${1:-}" != --inside ]]; then
    command -v unshare >/dev/null || { echo "test-setup: unshare (util-linux) is required" >&2; exit 1; }
    userns=()
    [[ $(id -u) -ne 0 ]] && userns=(--map-root-user)
    exec unshare --mount "${userns[@]}" bash "$0" --inside
fi

mount --make-rprivate / 2>/dev/null || true
# Hide every real libclang so that only the stubs describe the machine.
shopt -s nullglob
for f in /usr/lib/llvm-*/lib/libclang*.so* /usr/lib/*-linux-gnu/libclang*.so* /lib/*-linux-gnu/libclang*.so* \
    /usr/lib64/libclang*.so* /usr/local/lib/libclang*.so*; do
    real="$(readlink -f "$f")"
    [[ -f "$real" ]] && mount --bind /dev/null "$real"
done
shopt -u nullglob

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/repo/scripts" "$work/stubs"
cp "$root/scripts/setup.sh" "$work/repo/scripts/setup.sh"
printf '#!/usr/bin/env bash\nexit 0\n' >"$work/repo/scripts/install-tools.sh"
chmod +x "$work/repo/scripts/"*.sh

# State files read by the stubs: ldconfig.txt (what `ldconfig -p` lists), dpkg.txt (installed
# packages, one per line), apt.log (apt-get's calls).
cat >"$work/stubs/ldconfig" <<'STUB'
#!/usr/bin/env bash
echo "$(wc -l <"$STATE/ldconfig.txt") libs found in cache \`/etc/ld.so.cache'"
while read -r lib; do [[ -n "$lib" ]] && printf '\t%s (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/%s\n' "$lib" "$lib"; done <"$STATE/ldconfig.txt"
STUB
cat >"$work/stubs/dpkg-query" <<'STUB'
#!/usr/bin/env bash
# Supports the one form setup.sh uses: -W -f='${Package} ${Status}\n' PATTERN...
shift 2
found=1
for pattern in "$@"; do
    while read -r pkg; do
        [[ -n "$pkg" && "$pkg" == $pattern ]] && { echo "$pkg install ok installed"; found=0; }
    done <"$STATE/dpkg.txt"
done
exit $found
STUB
cat >"$work/stubs/apt-get" <<'STUB'
#!/usr/bin/env bash
echo "$*" >>"$STATE/apt.log"
if [[ " $* " == *" install "* && " $* " == *" libclang-dev "* ]]; then
    printf 'libclang-dev\nlibclang-14-dev\nlibclang1-14\n' >>"$STATE/dpkg.txt"
    printf 'libclang-14.so.1\nlibclang-14.so\n' >>"$STATE/ldconfig.txt"
fi
STUB
chmod +x "$work/stubs/"*

failures=0
# case NAME EXPECT(install|skip|fail) LDCONFIG_LIBS DPKG_PACKAGES [LIBCLANG_PATH]
case_() {
    local name="$1" expect="$2" libs="$3" pkgs="$4" libclang_path="${5:-}"
    export STATE="$work/state-$name"
    mkdir -p "$STATE"
    tr ' ' '\n' <<<"$libs" >"$STATE/ldconfig.txt"
    tr ' ' '\n' <<<"$pkgs" >"$STATE/dpkg.txt"
    : >"$STATE/apt.log"
    local rc=0
    env PATH="$work/stubs:$PATH" ${libclang_path:+LIBCLANG_PATH="$libclang_path"} \
        bash ${AFR_TEST_SETUP_TRACE:+-x} "$work/repo/scripts/setup.sh" >"$STATE/out" 2>&1 || rc=$?
    local got
    if [[ $rc -ne 0 ]]; then
        got=fail
    elif grep -q 'install -y -qq libclang-dev' "$STATE/apt.log"; then
        # apt-get update must come first, or a fresh image's empty package lists make install fail.
        if [[ "$(head -n 1 "$STATE/apt.log")" != update* ]]; then
            got=install-without-update
        else
            got=install
        fi
    elif [[ -s "$STATE/apt.log" ]]; then
        got="apt-get called: $(tr '\n' ';' <"$STATE/apt.log")"
    else
        got=skip
    fi
    if [[ "$got" == "$expect" ]]; then
        echo "ok   $name: $got" >&2
    else
        echo "FAIL $name: expected $expect, got $got" >&2
        sed 's/^/     | /' "$STATE/out" >&2
        failures=$((failures + 1))
    fi
}

# The reported fresh Debian 12 image: only the C++ API library, which bindgen cannot use.
case_ only-libclang-cpp install "libclang-cpp.so.14" "libclang-cpp14"
# Nothing at all.
case_ nothing install "" ""
# The runtime library alone (libclang1-14) lacks the resource headers bindgen needs.
case_ runtime-without-dev install "libclang-14.so.1" "libclang1-14"
# libclang-dev installed: nothing to do.
case_ ready skip "libclang-cpp.so.14 libclang-14.so.1 libclang-14.so" "libclang-cpp14 libclang1-14 libclang-14-dev libclang-dev"
# Only the versioned -dev package (as `apt-get install libclang-15-dev` leaves it): nothing to do.
case_ versioned-dev skip "libclang-15.so.1" "libclang1-15 libclang-15-dev"
# A usable LIBCLANG_PATH is what bindgen loads first: trusted as it is.
mkdir -p "$work/llvm/lib"
: >"$work/llvm/lib/libclang.so"
case_ libclang-path skip "" "" "$work/llvm/lib"
# The package database says installed but no library is there (and this machine's real ones
# are hidden): the files are what counts.
case_ dev-listed-files-gone install "" "libclang-14-dev libclang-dev"
# A LIBCLANG_PATH holding only libclang-cpp is not usable; setup must not pretend otherwise.
mkdir -p "$work/cpp-only"
: >"$work/cpp-only/libclang-cpp.so.14"
case_ libclang-path-cpp-only fail "" "" "$work/cpp-only"

if [[ $failures -ne 0 ]]; then
    echo "test-setup: $failures case(s) failed" >&2
    exit 1
fi
echo "test-setup: all cases passed" >&2
