#!/usr/bin/env python3
"""Looks items up in an atomic-cuckoo sharded filter in a Redis Cluster: a client in another
language, written from docs/SHARDED.md alone (the rule, the manifest), with redis-py.

Usage: sharded_client.py --host H --port P --name NAME --items FILE

FILE holds one item per line (UTF-8, without the newline). Prints one line per item, in order:
1 if the filter may hold it, 0 if not. Exits 1 with a message on stderr if the manifest is
missing or malformed, or a shard key it names is missing or not a cuckoo filter.

redis-py comes from scripts/install-redis.sh (PYTHONPATH=.redis-stack/python).
"""
import argparse
import sys

from redis.cluster import RedisCluster

M, R, MASK = 0xC6A4A7935BD1E995, 47, (1 << 64) - 1
MAGIC = "atomic-cuckoo sharded filter v1"


def murmur64a(data: bytes) -> int:
    h = (len(data) * M) & MASK
    whole = len(data) // 8 * 8
    for i in range(0, whole, 8):
        k = (int.from_bytes(data[i:i + 8], "little") * M) & MASK
        k = ((k ^ (k >> R)) * M) & MASK
        h = ((h ^ k) * M) & MASK
    if len(data) > whole:
        h = ((h ^ int.from_bytes(data[whole:], "little")) * M) & MASK
    h = ((h ^ (h >> R)) * M) & MASK
    return h ^ (h >> R)


def shard_of(item: bytes, shards: int) -> int:
    return ((murmur64a(item) >> 32) * shards) >> 32


def crc16(data: bytes) -> int:
    """CRC-16/XMODEM, Redis Cluster's key hash."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def refuse(name: str, why: str) -> None:
    sys.exit(f"{name!r} holds no sharded filter's manifest: {why}")


def shard_keys(cluster: RedisCluster, name: str) -> list:
    """The manifest's shard keys, in shard order, checked as docs/SHARDED.md describes them."""
    text = cluster.get(name)
    if text is None:
        sys.exit(f"no manifest at {name!r}")
    try:
        lines = text.decode().split("\n")
    except UnicodeDecodeError:
        refuse(name, "not UTF-8")
    if lines[-1] == "":
        lines.pop()
    if len(lines) < 3 or lines[0] != MAGIC:
        refuse(name, "no header")
    fields = [line.split(" ") for line in lines[1:3]]
    if [f[0] for f in fields] != ["generation", "shards"] or any(
            len(f) != 2 or not f[1].isdigit() for f in fields):
        refuse(name, "bad generation or shards line")
    generation, shards = int(fields[0][1]), int(fields[1][1])
    if not 1 <= shards <= 16384:
        refuse(name, f"{shards} shards")
    keys = lines[3:]
    if len(keys) != shards:
        refuse(name, f"{len(keys)} keys for {shards} shards")
    for shard, key in enumerate(keys):
        prefix = f"{name}:{generation}:{shard}:{{"
        tag = key[len(prefix):-1]
        slot = ((2 * shard + 1) * 16384) // (2 * shards)
        if not (key.startswith(prefix) and key.endswith("}") and tag
                and all(c in "0123456789abcdef" for c in tag)
                and crc16(tag.encode()) & 0x3FFF == slot):
            refuse(name, f"shard {shard}'s key {key!r} is not the rule's")
    return keys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--items", required=True)
    args = parser.parse_args()
    with open(args.items, "rb") as f:
        items = f.read().split(b"\n")
    if items and items[-1] == b"":
        items.pop()
    cluster = RedisCluster(host=args.host, port=args.port)
    keys = shard_keys(cluster, args.name)
    groups = {}
    for i, item in enumerate(items):
        groups.setdefault(shard_of(item, len(keys)), []).append(i)
    answers = [0] * len(items)
    for shard, members in groups.items():
        key = keys[shard]
        for start in range(0, len(members), 10_000):
            chunk = members[start:start + 10_000]
            replies = cluster.execute_command("CF.MEXISTS", key, *(items[i] for i in chunk))
            for i, found in zip(chunk, replies):
                answers[i] = int(found)
        # After the lookups: CF.MEXISTS answers 0 for every item of a key that is gone (a
        # replaced generation's) or holds another type.
        kind = cluster.type(key)
        if kind != b"MBbloomCF":
            sys.exit(f"shard {shard}: the key {key!r} is {kind!r}, not a cuckoo filter; "
                     "read the manifest again")
    sys.stdout.write("".join(f"{a}\n" for a in answers))


if __name__ == "__main__":
    main()
