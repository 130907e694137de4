#!/usr/bin/env bash
# A throw-away Redis Cluster on 127.0.0.1 with the RedisBloom module on every master, for the
# sharded-filter example and for trying `ShardedFilter::export_to` by hand. Needs what
# scripts/install-redis.sh installs (redis-server, redis-cli, .redis-stack/redisbloom.so).
#
#   scripts/redis-cluster.sh start DIR [MASTERS] [FIRST_PORT]
#       starts MASTERS masters (default 3) on ports FIRST_PORT, FIRST_PORT+1, ... (default: a
#       free range), without persistence, their files in DIR; joins them with
#       `redis-cli --cluster create` (the slots split evenly, no replicas); waits until every
#       node says cluster_state:ok; prints one node URL per line.
#   scripts/redis-cluster.sh stop DIR
#       shuts down the masters started in DIR and removes DIR.
set -euo pipefail

die() { echo "redis-cluster.sh: $*" >&2; exit 1; }
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE="${REDISBLOOM_MODULE:-$REPO_ROOT/.redis-stack/redisbloom.so}"

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A first port such that it and the next MASTERS-1 ports, and their cluster bus ports (port +
# 10000), are free.
free_range() {
    local masters=$1 first p i ok
    for _ in $(seq 1 100); do
        first=$(( 20000 + (RANDOM * 32768 + RANDOM) % 30000 ))
        ok=1
        for i in $(seq 0 $((masters - 1))); do
            p=$((first + i))
            if port_in_use "$p" || port_in_use $((p + 10000)); then ok=0; break; fi
        done
        [ "$ok" = 1 ] && { echo "$first"; return 0; }
    done
    return 1
}

start() {
    local dir=$1 masters=${2:-3} first=${3:-}
    command -v redis-server >/dev/null || die "no redis-server: run scripts/install-redis.sh"
    command -v redis-cli >/dev/null || die "no redis-cli: run scripts/install-redis.sh"
    [ -f "$MODULE" ] || die "no RedisBloom module at $MODULE: run scripts/install-redis.sh"
    [ "$masters" -ge 3 ] || die "redis-cli --cluster create needs at least 3 masters"
    [ -n "$first" ] || first=$(free_range "$masters") || die "no free port range"
    mkdir -p "$dir"
    : >"$dir/ports"
    local nodes=() p i
    for i in $(seq 0 $((masters - 1))); do
        p=$((first + i))
        mkdir -p "$dir/$p"
        redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir/$p" \
            --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
            --loadmodule "$MODULE" --daemonize yes --logfile "$dir/$p/server.log" \
            --pidfile "$dir/$p/server.pid" || die "redis-server on port $p did not start"
        echo "$p" >>"$dir/ports"
        nodes+=("127.0.0.1:$p")
    done
    for p in $(cat "$dir/ports"); do
        for _ in $(seq 1 100); do
            redis-cli -p "$p" PING 2>/dev/null | grep -q PONG && break
            sleep 0.05
        done
        redis-cli -p "$p" PING 2>/dev/null | grep -q PONG ||
            { cat "$dir/$p/server.log" >&2; die "the node on port $p does not answer"; }
    done
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$dir/create.log" 2>&1 ||
        { cat "$dir/create.log" >&2; die "redis-cli --cluster create failed"; }
    for p in $(cat "$dir/ports"); do
        for _ in $(seq 1 200); do
            redis-cli -p "$p" CLUSTER INFO | grep -q 'cluster_state:ok' && break
            sleep 0.05
        done
        redis-cli -p "$p" CLUSTER INFO | grep -q 'cluster_state:ok' ||
            die "the node on port $p never reached cluster_state:ok"
    done
    for p in $(cat "$dir/ports"); do echo "redis://127.0.0.1:$p/"; done
}

stop() {
    local dir=$1 p
    [ -f "$dir/ports" ] || die "no cluster in $dir"
    for p in $(cat "$dir/ports"); do
        redis-cli -p "$p" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
    done
    rm -rf "$dir"
}

case "${1:-}" in
    start) shift; [ $# -ge 1 ] || die "usage: $0 start DIR [MASTERS] [FIRST_PORT]"; start "$@" ;;
    stop) shift; [ $# -eq 1 ] || die "usage: $0 stop DIR"; stop "$1" ;;
    *) die "usage: $0 start DIR [MASTERS] [FIRST_PORT] | stop DIR" ;;
esac
