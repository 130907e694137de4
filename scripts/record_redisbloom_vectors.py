#!/usr/bin/env python3
"""Record reference vectors from a live Redis + RedisBloom (CF.* commands).

Standard library only (Python 3.11+). Starts its own redis-server(s) with the RedisBloom
module on free 127.0.0.1 ports (`--save "" --appendonly no`), runs fixed-seed operation
sequences and writes JSON files to tests/data/redisbloom/ (schema: README.md there).

    scripts/install-redis.sh                      # once: redis-server + .redis-stack/redisbloom.so
    python3 scripts/record_redisbloom_vectors.py  # rewrites tests/data/redisbloom/*.json

Options: --out DIR, --redis-server PATH, --module PATH, --only FAMILY[,FAMILY] where
FAMILY is one of sequences, errors, loadchunk, large.

The output is deterministic: the same Redis and module give byte-identical files.
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

SEED = 20260622           # the master seed; every case's seed is derived from it
FORMAT_VERSION = 1
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODULE = os.path.join(REPO_ROOT, ".redis-stack", "redisbloom.so")
MODULE_REL = ".redis-stack/redisbloom.so"
MAX_EXP_SERVER_ARG = 4    # module load-time argument CF_MAX_EXPANSIONS for server "max_expansions_4"


# ======================================================================================
# A tiny RESP2 client.
# ======================================================================================
class Simple(str):
    """A RESP2 simple-string reply (+OK)."""


class Err(str):
    """A RESP2 error reply; the text after the leading '-'."""


NIL_ARRAY = object()


class Resp:
    def __init__(self, port, timeout=120.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rf = self.sock.makefile("rb", buffering=1 << 20)

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        return b"".join(out)

    def read(self):
        line = self.rf.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("connection closed by the server")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return Simple(rest.decode())
        if kind == b"-":
            return Err(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.rf.read(n + 2)
            if len(data) != n + 2:
                raise ConnectionError("short bulk read")
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            return NIL_ARRAY if n < 0 else [self.read() for _ in range(n)]
        raise ValueError("bad RESP type byte %r" % kind)

    def call(self, *args):
        self.sock.sendall(self.encode(args))
        return self.read()

    def pipeline(self, commands, batch=2000):
        replies = []
        for i in range(0, len(commands), batch):
            part = commands[i:i + batch]
            self.sock.sendall(b"".join(self.encode(c) for c in part))
            replies.extend(self.read() for _ in part)
        return replies

    def close(self):
        self.rf.close()
        self.sock.close()


def reply_json(r):
    """Reply -> JSON object: {"simple"}, {"err"}, {"int"}, {"bulk": hex|null}, {"array": [...]|null}."""
    if isinstance(r, Simple):
        return {"simple": str(r)}
    if isinstance(r, Err):
        return {"err": str(r)}
    if isinstance(r, int):
        return {"int": r}
    if r is None:
        return {"bulk": None}
    if isinstance(r, bytes):
        return {"bulk": r.hex()}
    if r is NIL_ARRAY:
        return {"array": None}
    return {"array": [reply_json(x) for x in r]}


def arg_bytes(a):
    return a if isinstance(a, bytes) else str(a).encode()


# ======================================================================================
# Server management.
# ======================================================================================
def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, redis_server, module, module_args=()):
        self.redis_server = redis_server
        self.module = module
        self.module_args = list(module_args)
        self.proc = None
        self.dir = tempfile.mkdtemp(prefix="redisbloom-rec-")

    def argv(self, port):
        return [self.redis_server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", self.dir, "--loadmodule", self.module] + self.module_args

    def argv_for_file(self):
        """The command line as recorded: port and work dir as placeholders, module path repo-relative."""
        a = self.argv(0)
        a[2] = "<port>"
        a[a.index("--dir") + 1] = "<tmpdir>"
        a[a.index("--loadmodule") + 1] = MODULE_REL
        a[0] = os.path.basename(a[0])
        return a

    def start(self):
        for _attempt in range(5):
            self.port = free_port()
            log = open(os.path.join(self.dir, "server.log"), "wb")
            self.proc = subprocess.Popen(self.argv(self.port), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    c = Resp(self.port, timeout=2)
                    if c.call("PING") == "PONG":
                        self.client = c
                        return self
                    c.close()
                except OSError:
                    time.sleep(0.05)
            self.stop()
            with open(os.path.join(self.dir, "server.log"), "rb") as f:
                text = f.read().decode(errors="replace")
            if "Address already in use" not in text:
                raise RuntimeError("redis-server did not start:\n" + text)
        raise RuntimeError("redis-server did not start (port races)")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                c = Resp(self.port, timeout=5)
                c.sock.sendall(Resp.encode(["SHUTDOWN", "NOSAVE"]))
                c.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


# ======================================================================================
# Recording helpers.
# ======================================================================================
INFO_FIELDS = ["Size", "Number of buckets", "Number of filters", "Number of items inserted",
               "Number of items deleted", "Bucket size", "Expansion rate", "Max iterations"]


def info_dict(c, key):
    r = c.call("CF.INFO", key)
    if isinstance(r, Err):
        return None
    d = {}
    for i in range(0, len(r), 2):
        d[str(r[i])] = r[i + 1]
    assert list(d) == INFO_FIELDS, d
    return d


def scandump(c, key):
    """The whole SCANDUMP sequence from iterator 0: list of (next_iterator, bytes|None) replies."""
    out, it = [], 0
    for _ in range(100000):
        r = c.call("CF.SCANDUMP", key, it)
        if isinstance(r, Err):
            return None
        out.append((r[0], r[1]))
        if r[0] == 0:
            return out
        it = r[0]
    raise RuntimeError("SCANDUMP did not end")


def item_args(cmd, args):
    """The item arguments of a command, as the module reads them (empty if none or malformed)."""
    if cmd in ("CF.ADD", "CF.ADDNX", "CF.EXISTS", "CF.COUNT", "CF.DEL"):
        return args[1:] if len(args) == 2 else []
    if cmd == "CF.MEXISTS":
        return args[1:]
    if cmd in ("CF.INSERT", "CF.INSERTNX"):
        i = 1
        while i < len(args):
            t = args[i][:1].lower()
            if t == b"c":
                i += 2
            elif t == b"n":
                i += 1
            elif t == b"i":
                return args[i + 1:]
            else:
                return []
    return []


class Case:
    def __init__(self, srv, name, description, key, reserve=None, seed=None, server="default"):
        self.srv, self.c = srv, srv.client
        self.d = {"name": name, "description": description, "server": server, "seed": seed,
                  "key": key, "reserve": reserve, "ops": [], "checkpoints": [],
                  "dump": None, "dump_uncompressed": None}
        self.key = key

    def op(self, cmd, *args, items=None):
        derived = item_args(cmd, [arg_bytes(a) for a in args])
        if items is not None:
            assert [arg_bytes(i) for i in items] == derived, (cmd, args, items)
        r = self.c.call(cmd, *args)
        self.d["ops"].append({"cmd": cmd, "args": [arg_bytes(a).hex() for a in args],
                              "items": [i.hex() for i in derived], "reply": reply_json(r)})
        return r

    def checkpoint(self):
        ops = len(self.d["ops"])
        if self.d["checkpoints"] and self.d["checkpoints"][-1]["after_op"] == ops:
            return
        sd = scandump(self.c, self.key)
        self.d["checkpoints"].append({
            "after_op": ops, "info": info_dict(self.c, self.key),
            "scandump": None if sd is None else [[it, None if b is None else b.hex()] for it, b in sd]})

    def finish(self, checkpoint=True, dump=True, uncompressed=False):
        if checkpoint:
            self.checkpoint()
        if dump:
            r = self.c.call("DUMP", self.key)
            self.d["dump"] = r.hex() if isinstance(r, bytes) else None
            if uncompressed:
                assert self.c.call("CONFIG", "SET", "rdbcompression", "no") == "OK"
                r = self.c.call("DUMP", self.key)
                self.d["dump_uncompressed"] = r.hex()
                assert self.c.call("CONFIG", "SET", "rdbcompression", "yes") == "OK"
        return self.d


def reserve_args(key, cap, bs=None, mi=None, exp=None, style="upper"):
    args = [key, cap]
    opts = []
    if bs is not None:
        opts.append(("BUCKETSIZE", bs))
    if mi is not None:
        opts.append(("MAXITERATIONS", mi))
    if exp is not None:
        opts.append(("EXPANSION", exp))
    if style == "mixed":       # options are case-insensitive and may come in any order
        opts = [(k.lower() if i % 2 == 0 else k.capitalize(), v) for i, (k, v) in enumerate(reversed(opts))]
    for k, v in opts:
        args += [k, v]
    return args


def reserve_obj(cap, bs, mi, exp):
    return {"capacity": cap, "bucket_size": 2 if bs is None else bs,
            "max_iterations": 20 if mi is None else mi, "expansion": 1 if exp is None else exp}


# ======================================================================================
# Family 1: operation sequences.
# ======================================================================================
BINARY_ITEMS = [b"\xff", b"\x80\x00\xfe", b"\xc3\x28\xa0\xa1", b"\x00", b"\xfe\xff\x00\x01\x02\x03\x04\x05\x06"]


def make_pool(rng, n):
    pool = [b""] + BINARY_ITEMS[:3]
    while len(pool) < n:
        x = rng.random()
        if x < 0.55:
            it = b"item:%d" % rng.randrange(1000000)
        elif x < 0.85:
            it = bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz0123456789")
                       for _ in range(rng.randrange(1, 25)))
        else:
            it = bytes([0x80 | rng.randrange(128)]) + bytes(rng.randrange(256)
                                                            for _ in range(rng.randrange(0, 12)))
        if it not in pool:
            pool.append(it)
    rng.shuffle(pool)
    return pool


PHASE_WEIGHTS = {
    # ADD ADDNX INSERT INSERTNX EXISTS MEXISTS COUNT DEL COMPACT
    "grow":   [50, 10, 6, 1, 10, 5, 8, 10, 1],
    "shrink": [10, 3, 2, 1, 8, 4, 5, 65, 3],
    "mixed":  [30, 8, 4, 1, 10, 5, 8, 30, 5],
}
OP_NAMES = ["CF.ADD", "CF.ADDNX", "CF.INSERT", "CF.INSERTNX", "CF.EXISTS", "CF.MEXISTS", "CF.COUNT",
            "CF.DEL", "CF.COMPACT"]


def run_random(case, rng, pool, n_ops, insert_size=(2, 6), cp_every=50, phases=(0.45, 0.8)):
    key = case.key
    present = []          # items believed present (multiset, as a list)

    def note_added(item, r):
        if r == 1:
            present.append(item)

    for i in range(n_ops):
        phase = "grow" if i < n_ops * phases[0] else ("shrink" if i < n_ops * phases[1] else "mixed")
        cmd = rng.choices(OP_NAMES, PHASE_WEIGHTS[phase])[0]
        if cmd in ("CF.ADD", "CF.ADDNX"):
            item = rng.choice(pool)
            r = case.op(cmd, key, item, items=[item])
            note_added(item, r)
        elif cmd in ("CF.INSERT", "CF.INSERTNX"):
            items = [rng.choice(pool) for _ in range(rng.randint(*insert_size))]
            style = rng.randrange(4)
            opts = [["ITEMS"], ["NOCREATE", "ITEMS"], ["CAPACITY", "1000", "ITEMS"], ["items"]][style]
            r = case.op(cmd, key, *opts, *items, items=items)
            if isinstance(r, list):
                for it, x in zip(items, r):
                    note_added(it, x)
        elif cmd in ("CF.EXISTS", "CF.COUNT"):
            item = rng.choice(pool)
            case.op(cmd, key, item, items=[item])
        elif cmd == "CF.MEXISTS":
            items = [rng.choice(pool) for _ in range(rng.randint(2, 8))]
            case.op(cmd, key, *items, items=items)
        elif cmd == "CF.DEL":
            if present and rng.random() < 0.85:
                item = present[rng.randrange(len(present))]
            else:
                item = rng.choice(pool)
            r = case.op(cmd, key, item, items=[item])
            if r == 1 and item in present:
                present.remove(item)
        elif cmd == "CF.COMPACT":
            case.op(cmd, key)
        if (i + 1) % cp_every == 0:
            case.checkpoint()


def seq_spec_example(srv):
    case = Case(srv, "spec_example",
                "Spec section 5 worked example: CF.RESERVE w 4 BUCKETSIZE 1, then CF.ADD a..h; "
                "a checkpoint after every operation; ends with CF.INFO, CF.DEBUG and the mid-filter "
                "SCANDUMP quirk (iterator 2 returns the whole sub-filter 0).",
                "w", reserve_obj(4, 1, None, None))
    case.op("CF.RESERVE", "w", 4, "BUCKETSIZE", 1)
    case.checkpoint()
    for x in "abcdefgh":
        case.op("CF.ADD", "w", x, items=[x])
        case.checkpoint()
    case.op("CF.INFO", "w")
    case.op("CF.DEBUG", "w")
    case.op("CF.SCANDUMP", "w", 2)
    case.op("CF.SCANDUMP", "w", 6)
    case.op("CF.SCANDUMP", "w", 13)
    d = case.finish(uncompressed=True)
    # Check against the bytes given in REDISBLOOM.md sections 5, 7.1 and 8.
    sd = d["checkpoints"][-1]["scandump"]
    want = [[1, "0800000000000000" "0400000000000000" "0000000000000000" "0300000000000000"
             "0100" "1400" "0100"], [5, "00c4cb10"], [9, "00bca906"], [13, "4b00001c"], [0, None]]
    if sd != want:
        raise AssertionError("spec example SCANDUMP differs from REDISBLOOM.md: %r" % sd)
    expected_dump = spec_dump_payload(8, 4, 0, [bytes.fromhex(h) for _, h in want[1:4]], 1, 20, 1)
    if d["dump"] != expected_dump.hex():
        raise AssertionError("spec example DUMP differs from REDISBLOOM.md section 8: %s" % d["dump"])
    return d


def seq_count_double(srv):
    case = Case(srv, "count_double",
                "Spec section 6: CF.RESERVE cnt 4 BUCKETSIZE 2 (2 buckets); item 'b' has fp 16 (even), "
                "so h1 and h2 are the same bucket and CF.COUNT counts it twice.",
                "cnt", reserve_obj(4, 2, None, None))
    case.op("CF.RESERVE", "cnt", 4, "BUCKETSIZE", 2)
    for cmd in ["CF.ADD", "CF.COUNT", "CF.ADD", "CF.COUNT", "CF.EXISTS", "CF.DEL", "CF.COUNT"]:
        case.op(cmd, "cnt", "b", items=[b"b"])
        case.checkpoint()
    for it in [b"a", b"foo", b""]:      # fp 196 (even), 217 (odd), 1 (odd)
        case.op("CF.ADD", "cnt", it, items=[it])
        case.op("CF.COUNT", "cnt", it, items=[it])
    return case.finish()


def seq_filter_full(srv):
    case = Case(srv, "filter_full_exp0",
                "EXPANSION 0: CF.ADD answers 'Filter is full', CF.INSERT/CF.INSERTNX answer -1 per item, "
                "once the single sub-filter and its kicks are exhausted.",
                "full", reserve_obj(4, 1, 5, 0))
    case.op("CF.RESERVE", "full", 4, "BUCKETSIZE", 1, "MAXITERATIONS", 5, "EXPANSION", 0)
    for x in ["a", "b", "c", "d", "e", "f", "g", "h", "", "foo"]:
        case.op("CF.ADD", "full", x, items=[x])
    case.checkpoint()
    case.op("CF.ADDNX", "full", "a", items=["a"])
    case.op("CF.ADDNX", "full", "zz", items=["zz"])
    case.op("CF.INSERT", "full", "ITEMS", "x", "y", "a", items=["x", "y", "a"])
    case.op("CF.INSERTNX", "full", "ITEMS", "x", "a", items=["x", "a"])
    case.op("CF.DEL", "full", "a", items=["a"])
    case.op("CF.ADD", "full", "x", items=["x"])
    case.op("CF.ADD", "full", "y", items=["y"])
    return case.finish()


def seq_max_exp_default(srv):
    case = Case(srv, "max_expansions_default_32",
                "Default server (CF_MAX_EXPANSIONS = 32): BUCKETSIZE 1, capacity 2 (2 buckets/sub-filter), "
                "MAXITERATIONS 5; CF.ADD until 'Maximum expansions reached' (checked once per command, "
                "when numFilters >= 32).",
                "mx32", reserve_obj(2, 1, 5, 1))
    case.op("CF.RESERVE", "mx32", 2, "BUCKETSIZE", 1, "MAXITERATIONS", 5, "EXPANSION", 1)
    n = 0
    for i in range(120):
        x = b"m%d" % i
        r = case.op("CF.ADD", "mx32", x, items=[x])
        if (i + 1) % 30 == 0:
            case.checkpoint()
        if isinstance(r, Err):
            n += 1
    case.op("CF.EXISTS", "mx32", b"m0", items=[b"m0"])
    case.op("CF.DEL", "mx32", b"m0", items=[b"m0"])
    case.op("CF.ADD", "mx32", b"again", items=[b"again"])
    assert n > 0, "expected 'Maximum expansions reached'"
    return case.finish()


def seq_max_exp_4(srv4):
    out = []
    case = Case(srv4, "max_expansions_4_add",
                "Server started with '--loadmodule redisbloom.so CF_MAX_EXPANSIONS 4': BUCKETSIZE 1, "
                "capacity 2, EXPANSION 1; CF.ADD until 'Maximum expansions reached'; deletes then let "
                "compaction drop sub-filters, after which adds succeed again.",
                "mx4", reserve_obj(2, 1, 20, 1), server="max_expansions_4")
    case.op("CF.RESERVE", "mx4", 2, "BUCKETSIZE", 1, "MAXITERATIONS", 20, "EXPANSION", 1)
    for i in range(16):
        x = b"q%d" % i
        case.op("CF.ADD", "mx4", x, items=[x])
    case.checkpoint()
    for i in range(0, 16, 2):
        x = b"q%d" % i
        case.op("CF.DEL", "mx4", x, items=[x])
    case.checkpoint()
    case.op("CF.COMPACT", "mx4")
    for i in range(16, 24):
        x = b"q%d" % i
        case.op("CF.ADD", "mx4", x, items=[x])
    out.append(case.finish())

    case = Case(srv4, "max_expansions_4_insert",
                "CF_MAX_EXPANSIONS 4 server: the limit is checked once per command, so one multi-item "
                "CF.INSERT grows far past 4 sub-filters; the next command is refused.",
                "mx4i", reserve_obj(4, 2, 5, 2), server="max_expansions_4")
    case.op("CF.RESERVE", "mx4i", 4, "BUCKETSIZE", 2, "MAXITERATIONS", 5, "EXPANSION", 2)
    items = [b"ins%d" % i for i in range(60)]
    case.op("CF.INSERT", "mx4i", "ITEMS", *items, items=items)
    case.checkpoint()
    case.op("CF.ADD", "mx4i", "late", items=["late"])
    case.op("CF.INSERT", "mx4i", "ITEMS", "late", items=["late"])
    case.op("CF.ADDNX", "mx4i", "late", items=["late"])
    case.op("CF.ADDNX", "mx4i", "ins0", items=["ins0"])
    case.op("CF.MEXISTS", "mx4i", *items[:10], "late", items=items[:10] + [b"late"])
    out.append(case.finish())
    return out


def seq_autocreate(srv, index):
    out = []
    rng = random.Random(SEED * 1000 + index)
    case = Case(srv, "autocreate_add",
                "No CF.RESERVE: the first CF.ADD auto-creates the filter with the module defaults "
                "(capacity 1024, bucket size 2 -> 512 buckets, max iterations 20, expansion 1).",
                "auto1", None, seed=SEED * 1000 + index)
    pool = make_pool(rng, 60)
    run_random(case, rng, pool, 150)
    out.append(case.finish())

    rng = random.Random(SEED * 1000 + index + 1)
    case = Case(srv, "autocreate_insert_capacity",
                "No CF.RESERVE: the first CF.INSERT auto-creates the filter with CAPACITY 20 "
                "(bucket size 2 -> 16 buckets, max iterations 20, expansion 1); later CAPACITY "
                "options are ignored.",
                "auto2", None, seed=SEED * 1000 + index + 1)
    pool = make_pool(rng, 50)
    first = pool[:5]
    case.op("CF.INSERT", "auto2", "CAPACITY", 20, "ITEMS", *first, items=first)
    run_random(case, rng, pool, 150)
    out.append(case.finish())
    return out


# (name, capacity, bucket size, max iterations, expansion, ops, pool, style, notes)
RANDOM_SETS = [
    # bucket size 1
    ("bs1_c2_e1_m20", 2, 1, 20, 1, 250, 60, "upper"),
    ("bs1_c4_e2_m5", 4, 1, 5, 2, 250, 60, "upper"),
    ("bs1_c8_e4_m20", 8, 1, 20, 4, 250, 70, "mixed"),
    ("bs1_c16_e3_m5", 16, 1, 5, 3, 250, 70, "upper"),
    ("bs1_c4_e0_m20", 4, 1, 20, 0, 150, 40, "upper"),
    ("bs1_c32_e1_m5", 32, 1, 5, 1, 300, 90, "upper"),
    # bucket size 2
    ("bs2_c4_e1_m20", 4, 2, 20, 1, 250, 60, "upper"),
    ("bs2_c8_e2_m20", 8, 2, 20, 2, 300, 80, "upper"),
    ("bs2_c16_e4_m5", 16, 2, 5, 4, 300, 90, "upper"),
    ("bs2_c12_e3_m20", 12, 2, 20, 3, 250, 80, "mixed"),
    ("bs2_c8_e0_m5", 8, 2, 5, 0, 150, 40, "upper"),
    ("bs2_c64_e1_m5", 64, 2, 5, 1, 400, 140, "upper"),
    ("bs2_c20_e2_m5", 20, 2, 5, 2, 300, 90, "upper"),
    # bucket size 3
    ("bs3_c6_e1_m20", 6, 3, 20, 1, 250, 70, "upper"),
    ("bs3_c10_e2_m5", 10, 3, 5, 2, 250, 70, "upper"),
    ("bs3_c30_e4_m20", 30, 3, 20, 4, 300, 90, "upper"),
    ("bs3_c7_e0_m20", 7, 3, 20, 0, 150, 40, "upper"),
    ("bs3_c48_e3_m5", 48, 3, 5, 3, 350, 120, "mixed"),
    # bucket size 4
    ("bs4_c8_e1_m20", 8, 4, 20, 1, 250, 70, "upper"),
    ("bs4_c16_e2_m5", 16, 4, 5, 2, 300, 90, "upper"),
    ("bs4_c64_e4_m20", 64, 4, 20, 4, 400, 140, "upper"),
    ("bs4_c40_e3_m20", 40, 4, 20, 3, 350, 120, "upper"),
    ("bs4_c16_e0_m5", 16, 4, 5, 0, 150, 50, "upper"),
    ("bs4_c32_e1_m5", 32, 4, 5, 1, 350, 110, "mixed"),
    # bucket size 8
    ("bs8_c16_e1_m20", 16, 8, 20, 1, 300, 90, "upper"),
    ("bs8_c32_e2_m5", 32, 8, 5, 2, 300, 100, "upper"),
    ("bs8_c64_e4_m5", 64, 8, 5, 4, 350, 130, "upper"),
    ("bs8_c24_e0_m20", 24, 8, 20, 0, 150, 60, "upper"),
    ("bs8_c48_e3_m20", 48, 8, 20, 3, 350, 120, "upper"),
]
# bucket size 255: 2 buckets of 255 slots, so growth needs hundreds of items -> big CF.INSERTs.
BS255_SETS = [
    ("bs255_c510_e1_m20", 510, 255, 20, 1, 80, 500, "upper"),
    ("bs255_c510_e2_m5", 510, 255, 5, 2, 80, 500, "upper"),
    ("bs255_c1020_e0_m20", 1020, 255, 20, 0, 80, 400, "upper"),
    ("bs255_c600_e4_m5", 600, 255, 5, 4, 80, 500, "mixed"),
]


def seq_random(srv, index, params, insert_size=(2, 6), uncompressed=False, prefill=0):
    name, cap, bs, mi, exp, n_ops, pool_n, style = params
    seed = SEED * 1000 + index
    rng = random.Random(seed)
    key = "k:" + name
    desc = ("Random operations, seed %d: capacity %d, BUCKETSIZE %d, MAXITERATIONS %d, EXPANSION %d; "
            "phases grow (45%%), shrink (35%%, delete-heavy: auto-compaction), mixed." % (seed, cap, bs, mi, exp))
    if style == "mixed":
        desc += " CF.RESERVE options in mixed case and reverse order."
    case = Case(srv, name, desc, key, reserve_obj(cap, bs, mi, exp), seed=seed)
    case.op("CF.RESERVE", *reserve_args(key, cap, bs, mi, exp, style))
    pool = make_pool(rng, pool_n)
    if prefill:
        desc += " Starts with CF.INSERTs of %d pool items (150 per command) so that it grows." % prefill
        case.d["description"] = desc
        items = [rng.choice(pool) for _ in range(prefill)]
        for i in range(0, prefill, 150):
            case.op("CF.INSERT", key, "ITEMS", *items[i:i + 150], items=items[i:i + 150])
        case.checkpoint()
    run_random(case, rng, pool, n_ops, insert_size=insert_size)
    if prefill:
        # A burst of deletes of prefilled items: numDeletes > 10% of numItems -> auto-compaction.
        case.d["description"] += " Ends with CF.DEL of the first 150 prefilled items."
        for j, it in enumerate(items[:150]):
            case.op("CF.DEL", key, it, items=[it])
            if j % 50 == 49:
                case.checkpoint()
    return case.finish(uncompressed=uncompressed)


def seq_compact(srv, index):
    seed = SEED * 1000 + index
    rng = random.Random(seed)
    key = "k:compact"
    case = Case(srv, "compact_explicit",
                "Fill a bucket-size-2 filter (capacity 8, EXPANSION 1) to several sub-filters, delete "
                "every other item with CF.COMPACT after each block of deletes, and re-add.",
                key, reserve_obj(8, 2, 20, 1), seed=seed)
    case.op("CF.RESERVE", key, 8, "BUCKETSIZE", 2, "MAXITERATIONS", 20, "EXPANSION", 1)
    items = make_pool(rng, 60)
    for it in items:
        case.op("CF.ADD", key, it, items=[it])
    case.checkpoint()
    case.op("CF.COMPACT", key)
    case.checkpoint()
    for j, it in enumerate(items[::2]):
        case.op("CF.DEL", key, it, items=[it])
        if j % 5 == 4:
            case.op("CF.COMPACT", key)
            case.checkpoint()
    case.op("CF.MEXISTS", key, *items, items=items)
    for it in items[::3]:
        case.op("CF.ADD", key, it, items=[it])
    case.op("CF.COMPACT", key)
    return case.finish()


def seq_compact_keeps_empty_middle(srv):
    key = "k:compact_mid"
    case = Case(srv, "compact_keeps_empty_middle",
                "CF.RESERVE 4 BUCKETSIZE 1 EXPANSION 1; CF.ADD z0..z24 (6 sub-filters); CF.DEL of 9 items "
                "(auto-compactions included); CF.COMPACT empties sub-filter 4 but cannot empty the last "
                "one (5), so nothing is freed: only the LAST sub-filter is ever dropped.",
                key, reserve_obj(4, 1, 20, 1))
    case.op("CF.RESERVE", key, 4, "BUCKETSIZE", 1, "EXPANSION", 1)
    for i in range(25):
        case.op("CF.ADD", key, b"z%d" % i, items=[b"z%d" % i])
    case.checkpoint()
    for i in (11, 7, 13, 0, 2, 9, 4, 19, 15):
        case.op("CF.DEL", key, b"z%d" % i, items=[b"z%d" % i])
        case.checkpoint()
    case.op("CF.COMPACT", key)
    case.checkpoint()
    items = [b"z%d" % i for i in range(25)]
    case.op("CF.MEXISTS", key, *items, items=items)
    return case.finish()


def family_sequences(srv, srv4):
    cases = [seq_spec_example(srv), seq_count_double(srv), seq_filter_full(srv), seq_max_exp_default(srv)]
    cases += seq_max_exp_4(srv4)
    cases += seq_autocreate(srv, 1)
    idx = 10
    for p in RANDOM_SETS:
        cases.append(seq_random(srv, idx, p, uncompressed=(p[0] == "bs4_c16_e2_m5")))
        idx += 1
    for p in BS255_SETS:
        cases.append(seq_random(srv, idx, p, insert_size=(5, 20), prefill=p[1] * 3 // 2))
        idx += 1
    cases.append(seq_compact(srv, idx))
    cases.append(seq_compact_keeps_empty_middle(srv))
    return cases


# ======================================================================================
# Family 2: command errors.
# ======================================================================================
def family_errors(srv):
    cases = []
    case = Case(srv, "reserve_errors",
                "CF.RESERVE argument validation; each op is independent (only 'ok:*' keys are created).",
                "e")
    bad = [
        ["e1", 10, "BUCKETSIZE", 0], ["e1", 10, "BUCKETSIZE", 256], ["e1", 600, "BUCKETSIZE", 256],
        ["e1", 10, "MAXITERATIONS", 0], ["e1", 10, "MAXITERATIONS", 65536],
        ["e1", 10, "EXPANSION", 32769], ["e1", 10, "EXPANSION", -1],
        ["e1", 3, "BUCKETSIZE", 2], ["e1", 3], ["e1", 509, "BUCKETSIZE", 255], ["e1", 0], ["e1", -5],
        ["e1", "abc"], ["e1", 10, "BUCKETSIZE", "abc"], ["e1", 10, "MAXITERATIONS", "x"],
        ["e1", 10, "EXPANSION", "1.5"], ["e1"], ["e1", 10, "BUCKETSIZE"],
    ]
    for a in bad:
        case.op("CF.RESERVE", *a)
    good = [
        ["ok:bs255", 510, "BUCKETSIZE", 255], ["ok:mi65535", 10, "MAXITERATIONS", 65535],
        ["ok:exp32768", 10, "EXPANSION", 32768], ["ok:exp0", 10, "EXPANSION", 0],
        ["ok:unknown", 100, "FOO", 3], ["ok:c1025", 1025, "BUCKETSIZE", 4, "EXPANSION", 3],
        ["ok:c7", 7, "BUCKETSIZE", 2, "EXPANSION", 5], ["ok:c100", 100, "BUCKETSIZE", 3],
        ["ok:c1000", 1000], ["ok:case", 64, "bucketsize", 4, "Expansion", 2, "maxiterations", 7],
    ]
    for a in good:
        case.op("CF.RESERVE", *a)
        case.op("CF.INFO", a[0])
    case.op("CF.RESERVE", "ok:c1000", 1000)
    cases.append(case.finish(checkpoint=False, dump=False))

    case = Case(srv, "missing_key", "Commands on a key that does not exist.", "nokey")
    for cmd, args in [("CF.EXISTS", ["a"]), ("CF.MEXISTS", ["a", "b"]), ("CF.COUNT", ["a"]),
                      ("CF.DEL", ["a"]), ("CF.COMPACT", []), ("CF.INFO", []), ("CF.DEBUG", []),
                      ("CF.SCANDUMP", [0]), ("CF.SCANDUMP", [1]), ("CF.INSERT", ["NOCREATE", "ITEMS", "a"]),
                      ("CF.INSERTNX", ["NOCREATE", "ITEMS", "a"]), ("CF.LOADCHUNK", [5, "xxxx"]),
                      ("EXISTS", [])]:
        case.op(cmd, "nokey", *args)
    cases.append(case.finish(checkpoint=False, dump=False))

    case = Case(srv, "wrong_type", "Commands on a key holding a plain string (SET str v).", "str")
    case.op("SET", "str", "v")
    for cmd, args in [("CF.ADD", ["a"]), ("CF.ADDNX", ["a"]), ("CF.INSERT", ["ITEMS", "a"]),
                      ("CF.EXISTS", ["a"]), ("CF.MEXISTS", ["a", "b"]), ("CF.COUNT", ["a"]),
                      ("CF.DEL", ["a"]), ("CF.COMPACT", []), ("CF.INFO", []), ("CF.SCANDUMP", [0]),
                      ("CF.LOADCHUNK", [1, b"\x00" * 38]), ("CF.LOADCHUNK", [5, "xxxx"]),
                      ("CF.RESERVE", [10])]:
        case.op(cmd, "str", *args)
    cases.append(case.finish(checkpoint=False, dump=False))

    case = Case(srv, "argument_errors", "Malformed commands and option parsing.", "ae")
    for cmd, args in [
        ("CF.ADD", ["ae"]), ("CF.ADD", ["ae", "a", "b"]), ("CF.EXISTS", ["ae"]), ("CF.MEXISTS", ["ae"]),
        ("CF.COUNT", ["ae"]), ("CF.DEL", ["ae"]), ("CF.COMPACT", []), ("CF.SCANDUMP", ["ae"]),
        ("CF.INSERT", ["ae"]), ("CF.INSERT", ["ae", "ITEMS"]), ("CF.INSERT", ["ae", "a"]),
        ("CF.INSERT", ["ae", "CAPACITY", 3, "ITEMS", "a"]), ("CF.INSERT", ["ae", "CAPACITY", -1, "ITEMS", "a"]),
        ("CF.INSERT", ["ae", "CAPACITY", "x", "ITEMS", "a"]), ("CF.INSERT", ["ae", "CAPACITY"]),
        ("CF.INSERT", ["ae", "BOGUS", "ITEMS", "a"]), ("CF.INSERT", ["ae", "COUNT", 4, "ITEMS", "a"]),
        ("CF.INSERT", ["ae", "NOPE", "ITEMS", "a"]), ("EXISTS", ["ae"]),
        ("CF.INSERT", ["ae", "cap", 16, "i", "a", "b"]), ("CF.INFO", ["ae"]),
        ("CF.SCANDUMP", ["ae", "abc"]), ("CF.SCANDUMP", ["ae", -1]), ("CF.SCANDUMP", ["ae", 1.5]),
        ("CF.LOADCHUNK", ["ae", "abc", "x"]), ("CF.LOADCHUNK", ["ae", 0, "x"]),
        ("CF.LOADCHUNK", ["ae"]), ("CF.LOADCHUNK", ["ae", 1, b"\x00" * 38]),
    ]:
        case.op(cmd, *args)
    cases.append(case.finish(checkpoint=False, dump=False))
    return cases


# ======================================================================================
# Family 3: CF.LOADCHUNK acceptance / rejection.
# ======================================================================================
def hdr(items, buckets, deletes, filters, bs, mi, exp):
    return struct.pack("<QQQQHHH", items, buckets, deletes, filters, bs, mi, exp)


PROBES = [b"", b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"foo", b"\xff", b"x", b"y", b"z"]


def lc_case(srv, name, description, key, chunks, after=(), checkpoint=True):
    case = Case(srv, name, description, key)
    for it, data in chunks:
        case.op("CF.LOADCHUNK", key, it, data)
    for cmd, args in after:
        case.op(cmd, key, *args)
    d = case.finish(checkpoint=checkpoint, dump=checkpoint)
    return d


def family_loadchunk(srv):
    c = srv.client
    cases = []
    # A reference filter built by commands: 3 sub-filters (sizes 8, 16, 32 bytes).
    ref = Case(srv, "source_filter",
               "The source of the round-trip cases: CF.RESERVE src 8 BUCKETSIZE 2 EXPANSION 2 and 40 adds.",
               "src", reserve_obj(8, 2, None, 2))
    ref.op("CF.RESERVE", "src", 8, "BUCKETSIZE", 2, "EXPANSION", 2)
    for i in range(40):
        ref.op("CF.ADD", "src", b"s%d" % i, items=[b"s%d" % i])
    src = ref.finish()
    cases.append(src)
    chunks = [(it, bytes.fromhex(h)) for it, h in src["checkpoints"][-1]["scandump"] if h is not None]
    header = chunks[0][1]
    data = b"".join(b for _, b in chunks[1:])
    sizes = [len(b) for _, b in chunks[1:]]
    probes = [b"s%d" % i for i in range(50)]
    cases.append(lc_case(srv, "roundtrip_scandump_chunks",
                         "LOADCHUNK the source's SCANDUMP chunks unchanged into a new key.",
                         "dst1", chunks, [("CF.MEXISTS", probes), ("CF.ADD", [b"new"]), ("CF.DEL", [b"s1"])]))
    small = [(1, header)]
    off = 0
    pieces = []
    while off < len(data):          # 7-byte pieces that never cross a sub-filter boundary
        base = 0
        for s in sizes:
            if off < base + s:
                end = min(off + 7, base + s)
                break
            base += s
        pieces.append((off + (end - off) + 1, data[off:end]))
        off = end
    small += list(reversed(pieces))
    cases.append(lc_case(srv, "roundtrip_small_chunks_reversed",
                         "LOADCHUNK the source in 7-byte pieces (never crossing a sub-filter) in reverse "
                         "order; iterator = end offset + 1.", "dst2", small, [("CF.MEXISTS", probes)]))
    cases.append(lc_case(srv, "header_37_bytes", "A 37-byte header: 'Invalid header'.", "h37",
                         [(1, header[:37])], [("EXISTS", [])], checkpoint=False))
    cases.append(lc_case(srv, "header_39_bytes", "A 39-byte header: 'Invalid header'.", "h39",
                         [(1, header + b"\x00")], [("EXISTS", [])], checkpoint=False))
    bad_headers = [
        ("buckets_6", hdr(5, 6, 0, 1, 2, 20, 1), "numBuckets 6 (not a power of two)"),
        ("buckets_0", hdr(5, 0, 0, 1, 2, 20, 1), "numBuckets 0"),
        ("bs_0", hdr(5, 4, 0, 1, 0, 20, 1), "bucketSize 0"),
        ("bs_256", hdr(5, 4, 0, 1, 256, 20, 1), "bucketSize 256"),
        ("filters_0", hdr(5, 4, 0, 0, 2, 20, 1), "numFilters 0"),
        ("filters_65536", hdr(5, 4, 0, 65536, 2, 20, 1), "numFilters 65536 (u16-truncated to 0)"),
        ("maxiter_0", hdr(5, 4, 0, 1, 2, 0, 1), "maxIterations 0"),
        ("buckets_2pow56", hdr(5, 1 << 56, 0, 1, 1, 20, 1), "numBuckets 2^56"),
    ]
    for nm, h, what in bad_headers:
        cases.append(lc_case(srv, "reject_" + nm, "Header with %s: rejected, no key created." % what,
                             "bad:" + nm, [(1, h)], [("EXISTS", [])], checkpoint=False))
    accepted = [
        ("filters_65537", hdr(5, 4, 0, 65537, 1, 20, 1),
         "numFilters 65537: accepted, truncated to 1 sub-filter (validation sees the u16 value)", []),
        ("filters_40", hdr(5, 2, 0, 40, 1, 20, 1),
         "numFilters 40 > CF_MAX_EXPANSIONS 32: accepted; lookups work, CF.ADD is refused",
         [("CF.EXISTS", [b"a"]), ("CF.ADD", [b"a"])]),
        ("expansion_3", hdr(3, 4, 0, 2, 1, 20, 3),
         "expansion 3 (not a power of two), 2 sub-filters: accepted, sizes 4 and 12", []),
        ("items_0_with_data", hdr(0, 4, 0, 1, 1, 20, 1),
         "numItems 0: the data loads, lookups answer from it, but SCANDUMP returns [0, nil]", []),
        ("header_only", hdr(7, 4, 3, 3, 1, 20, 2),
         "header only: an all-zero filter with the header's counters (7 items, 3 deletes)", []),
        ("bs255", hdr(1, 2, 0, 1, 255, 65535, 32768), "bucketSize 255, maxIterations 65535, expansion 32768", []),
        ("expansion0_filters2", hdr(5, 4, 0, 2, 1, 20, 0),
         "expansion 0 with 2 sub-filters: accepted by 2.8.2 (gives a 0-bucket sub-filter). "
         "Do NOT query it: CF.EXISTS crashes 2.8.2 with SIGFPE. Only CF.INFO and SCANDUMP are recorded.", []),
    ]
    for nm, h, what, after in accepted:
        chunks_ = [(1, h)]
        if nm == "expansion_3":
            chunks_ += [(5, bytes.fromhex("c4cb1000")), (17, bytes(11) + b"\xbc")]
        if nm == "items_0_with_data":
            chunks_ += [(5, bytes.fromhex("00c4cb10"))]
        after = list(after) + [("CF.MEXISTS", PROBES)] if nm != "expansion0_filters2" else []
        cases.append(lc_case(srv, "accept_" + nm, "Header with %s." % what, "acc:" + nm, chunks_, after))
    # Chunk errors on a key with sub-filters of 4, 8 and 16 bytes (bs 1, 4 buckets, expansion 2).
    h = hdr(9, 4, 0, 3, 1, 20, 2)
    chunk_cases = [
        ("straddle", [(1, h), (7, b"ABCDEF")], "a 6-byte chunk at offset 0..6 straddles sub-filters 0 and 1"),
        ("empty", [(1, h), (5, b"")], "an empty chunk"),
        ("it_minus_1_lt_len", [(1, h), (3, b"ABCD")], "it-1 (2) < len (4)"),
        ("negative_it", [(1, h), (-1, b"A")], "iterator -1"),
        ("zero_it", [(1, h), (0, b"A")], "iterator 0"),
        ("wraparound", [(1, h), (30, b"B"), (46, b"F"), (29, b"E"), (5, b"\x01\x02\x03\x04")],
         "wrap-around quirk: stream total 28 bytes; LOADCHUNK 30 'B' (offset 28) lands at sub2[0]; "
         "46 'F' (offset 44) is refused; 29 'E' (offset 27) is the last byte of sub2"),
        ("header_twice", [(1, h), (1, h)], "a second header chunk on an existing key: 'ERR item exists'"),
        ("any_offsets", [(1, h), (3, b"\x11\x22"), (13, b"\x33" * 8), (29, b"\x44\x55"), (21, b"\x66")],
         "chunks at arbitrary offsets inside one sub-filter each"),
        ("ff_data", [(1, h), (5, b"\xff" * 4), (13, b"\xff" * 8), (29, b"\xff" * 16)],
         "all-0xff data is accepted (content is never validated)"),
    ]
    for nm, chunks_, what in chunk_cases:
        cases.append(lc_case(srv, "chunk_" + nm, "Sub-filters 4/8/16 bytes: %s." % what, "ch:" + nm,
                             chunks_, [("CF.MEXISTS", PROBES)]))
    # Data chunks into a key made by CF.RESERVE with the same geometry: numItems stays 0.
    case = Case(srv, "chunks_into_reserved_key",
                "CF.RESERVE res 8 BUCKETSIZE 2 EXPANSION 2 (one sub-filter of 4 buckets), then LOADCHUNK "
                "the source's sub-filter 0 data: accepted, numItems stays 0 so SCANDUMP is [0, nil]; "
                "the source's sub-filter 1 chunk is refused (offsets 8..23 wrap to the last and only "
                "sub-filter and do not fit).",
                "res", reserve_obj(8, 2, None, 2))
    case.op("CF.RESERVE", "res", 8, "BUCKETSIZE", 2, "EXPANSION", 2)
    case.op("CF.LOADCHUNK", "res", chunks[1][0], chunks[1][1])
    case.op("CF.LOADCHUNK", "res", chunks[2][0], chunks[2][1])
    case.op("CF.MEXISTS", "res", *probes, items=probes)
    cases.append(case.finish())
    assert c.call("PING") == "PONG"
    return cases


# ======================================================================================
# Family 4: large filters (only hashes of the dumps are stored).
# ======================================================================================
def dec(i):
    return str(i).encode()


def rle(replies):
    out = []
    for r in replies:
        j = reply_json(r)
        if out and out[-1][0] == j:
            out[-1][1] += 1
        else:
            out.append([j, 1])
    return out


class LargeCase:
    def __init__(self, srv, name, description, key, reserve):
        self.c = srv.client
        self.key = key
        self.d = {"name": name, "description": description, "key": key, "reserve": reserve,
                  "steps": [], "checkpoints": [], "dump_sha256": None, "dump_len": None}

    def step(self, cmd, start, end, per_command=1):
        cmds, items = [], [dec(i) for i in range(start, end)]
        for i in range(0, len(items), per_command):
            part = items[i:i + per_command]
            if cmd == "CF.INSERT":
                cmds.append([cmd, self.key, "ITEMS"] + part)
            else:
                cmds.append([cmd, self.key] + part)
        replies = self.c.pipeline(cmds)
        flat = []
        for r in replies:
            flat.extend(r if isinstance(r, list) else [r])
        self.d["steps"].append({"cmd": cmd, "range": [start, end], "per_command": per_command,
                                "replies_rle": rle(flat)})

    def checkpoint(self):
        sd = scandump(self.c, self.key)
        self.d["checkpoints"].append({
            "after_step": len(self.d["steps"]), "info": info_dict(self.c, self.key),
            "scandump": [{"it": it, "len": None if b is None else len(b),
                          "sha256": None if b is None else hashlib.sha256(b).hexdigest(),
                          "hex": b.hex() if b is not None and len(b) == 38 and n == 0 else None}
                         for n, (it, b) in enumerate(sd)]})

    def finish(self):
        self.checkpoint()
        r = self.c.call("DUMP", self.key)
        self.d["dump_sha256"] = hashlib.sha256(r).hexdigest()
        self.d["dump_len"] = len(r)
        self.c.call("DEL", self.key)
        return self.d


def family_large(srv):
    cases = []
    c = srv.client
    lc = LargeCase(srv, "c100000_bs4_add50k",
                   "CF.RESERVE big1 100000 BUCKETSIZE 4 (32768 buckets); CF.ADD '0'..'49999'; "
                   "MEXISTS of '0'..'59999' (the last 10000 were never added: false positives).",
                   "big1", reserve_obj(100000, 4, None, None))
    assert c.call("CF.RESERVE", "big1", 100000, "BUCKETSIZE", 4) == "OK"
    lc.step("CF.ADD", 0, 50000)
    lc.checkpoint()
    lc.step("CF.MEXISTS", 0, 60000, per_command=1000)
    lc.step("CF.COUNT", 0, 2000)
    cases.append(lc.finish())

    lc = LargeCase(srv, "c10000_bs2_e2_grow_and_delete",
                   "CF.RESERVE big2 10000 BUCKETSIZE 2 EXPANSION 2 (8192 buckets); CF.ADD '0'..'49999' "
                   "(grows to several sub-filters); CF.DEL '0'..'29999' (auto-compaction); MEXISTS of "
                   "'0'..'59999'.",
                   "big2", reserve_obj(10000, 2, None, 2))
    assert c.call("CF.RESERVE", "big2", 10000, "BUCKETSIZE", 2, "EXPANSION", 2) == "OK"
    lc.step("CF.ADD", 0, 50000)
    lc.checkpoint()
    lc.step("CF.DEL", 0, 30000)
    lc.checkpoint()
    lc.step("CF.MEXISTS", 0, 60000, per_command=1000)
    cases.append(lc.finish())

    lc = LargeCase(srv, "c1000_bs8_e4_m5_insert",
                   "CF.RESERVE big3 1000 BUCKETSIZE 8 MAXITERATIONS 5 EXPANSION 4 (128 buckets); "
                   "CF.INSERT of '0'..'39999' in commands of 500 items; CF.DEL '10000'..'19999'; "
                   "CF.COMPACT; MEXISTS of '0'..'49999'.",
                   "big3", reserve_obj(1000, 8, 5, 4))
    assert c.call("CF.RESERVE", "big3", 1000, "BUCKETSIZE", 8, "MAXITERATIONS", 5, "EXPANSION", 4) == "OK"
    lc.step("CF.INSERT", 0, 40000, per_command=500)
    lc.checkpoint()
    lc.step("CF.DEL", 10000, 20000)
    lc.checkpoint()
    r = c.call("CF.COMPACT", "big3")
    assert r == "OK"
    lc.d["steps"].append({"cmd": "CF.COMPACT", "range": [0, 0], "per_command": 0,
                          "replies_rle": [[reply_json(r), 1]]})
    lc.checkpoint()
    lc.step("CF.MEXISTS", 0, 50000, per_command=1000)
    cases.append(lc.finish())

    lc = LargeCase(srv, "c33554432_bs1_scandump_split",
                   "CF.RESERVE big4 33554432 BUCKETSIZE 1: one 32 MiB sub-filter, SCANDUMP splits it "
                   "into two 16 MiB chunks; CF.ADD '0'..'999'.",
                   "big4", reserve_obj(33554432, 1, None, None))
    assert c.call("CF.RESERVE", "big4", 33554432, "BUCKETSIZE", 1) == "OK"
    lc.step("CF.ADD", 0, 1000)
    lc.step("CF.MEXISTS", 0, 2000, per_command=1000)
    cases.append(lc.finish())
    return cases


# ======================================================================================
# DUMP payload model from REDISBLOOM.md section 8 (used only to check the spec example).
# ======================================================================================
def crc64_jones(data):
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x95AC9329AC4BC9B5 if crc & 1 else 0)
    return crc


def rdb_len(n):
    if n < 64:
        return bytes([n])
    if n < 16384:
        return bytes([0x40 | (n >> 8), n & 0xFF])
    if n < 1 << 32:
        return b"\x80" + struct.pack(">I", n)
    return b"\x81" + struct.pack(">Q", n)


def spec_dump_payload(items, buckets, deletes, subs, bs, mi, exp, rdb_version=10):
    out = b"\x07\x81" + bytes.fromhex("3016e5a289821404")
    for v in (len(subs), buckets, items, deletes, bs, mi, exp):
        out += b"\x02" + rdb_len(v)
    for s in subs:
        out += b"\x02" + rdb_len(len(s) // bs) + b"\x05" + rdb_len(len(s)) + s
    out += b"\x00" + struct.pack("<H", rdb_version)
    return out + struct.pack("<Q", crc64_jones(out))


# ======================================================================================
# Output.
# ======================================================================================
ONE_LINE_ELEMENTS = ("ops", "steps", "scandump", "replies_rle", "servers")
ONE_LINE_VALUES = ("info", "reserve")


def fmt(obj, indent=0, width=110, one_line_elements=False):
    """Deterministic JSON layout: containers are expanded where their one-line form is too long,
    except that each element of the lists named in ONE_LINE_ELEMENTS stays on one line."""
    one = json.dumps(obj, separators=(",", ":"))
    if not isinstance(obj, (dict, list)) or not obj or len(one) + indent <= width:
        return one
    pad = " " * (indent + 1)
    if isinstance(obj, dict):
        if one_line_elements:
            body = ",\n".join(pad + json.dumps(k) + ": " + json.dumps(v, separators=(",", ":"))
                              for k, v in obj.items())
        else:
            body = ",\n".join(pad + json.dumps(k) + ": " + (
                json.dumps(v, separators=(",", ":")) if k in ONE_LINE_VALUES
                else fmt(v, indent + 1, width, k in ONE_LINE_ELEMENTS)) for k, v in obj.items())
        return "{\n" + body + "\n" + " " * indent + "}"
    if one_line_elements:
        body = ",\n".join(pad + json.dumps(v, separators=(",", ":")) for v in obj)
    else:
        body = ",\n".join(pad + fmt(v, indent + 1, width) for v in obj)
    return "[\n" + body + "\n" + " " * indent + "]"


def write_family(out_dir, fname, header, family, cases):
    doc = dict(header)
    doc["family"] = family
    doc["cases"] = cases
    path = os.path.join(out_dir, fname)
    with open(path, "w", encoding="ascii", newline="\n") as f:
        f.write(fmt(doc) + "\n")
    print("wrote %s (%d bytes, %d cases)" % (path, os.path.getsize(path), len(cases)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO_ROOT, "tests", "data", "redisbloom"))
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "/usr/bin/redis-server")
    ap.add_argument("--module", default=DEFAULT_MODULE)
    ap.add_argument("--only", default="sequences,errors,loadchunk,large")
    a = ap.parse_args()
    if not os.path.exists(a.module):
        sys.exit("record: %s is missing; run scripts/install-redis.sh first" % a.module)
    if not os.path.exists(a.redis_server):
        sys.exit("record: redis-server not found; run scripts/install-redis.sh first")
    module = os.path.abspath(a.module)
    only = set(a.only.split(","))
    os.makedirs(a.out, exist_ok=True)

    srv = Server(a.redis_server, module).start()
    srv4 = Server(a.redis_server, module, ["CF_MAX_EXPANSIONS", str(MAX_EXP_SERVER_ARG)]).start()
    try:
        c = srv.client
        redis_version = [l.split(":", 1)[1] for l in c.call("INFO", "server").decode().split("\r\n")
                         if l.startswith("redis_version:")][0]
        mods = {}
        for m in c.call("MODULE", "LIST"):
            kv = {m[i].decode() if isinstance(m[i], bytes) else str(m[i]): m[i + 1] for i in range(0, len(m), 2)}
            mods[kv["name"].decode()] = kv
        ver = mods["bf"]["ver"]
        header = {
            "format_version": FORMAT_VERSION,
            "generator": "scripts/record_redisbloom_vectors.py",
            "redis_version": redis_version,
            "redisbloom_module_ver": ver,
            "redisbloom_version": "%d.%d.%d" % (ver // 10000, ver // 100 % 100, ver % 100),
            "seed": SEED,
            "servers": {"default": srv.argv_for_file(), "max_expansions_4": srv4.argv_for_file()},
            "server_notes": "'default' uses the module's compile-time CF_MAX_EXPANSIONS (32); "
                            "'max_expansions_4' loads the module with the argument CF_MAX_EXPANSIONS 4. "
                            "<port> and <tmpdir> are chosen per run. rdbcompression is yes (default) "
                            "except while dump_uncompressed is taken.",
        }
        if "sequences" in only:
            write_family(a.out, "sequences.json", header, "sequences", family_sequences(srv, srv4))
        if "errors" in only:
            write_family(a.out, "errors.json", header, "errors", family_errors(srv))
        if "loadchunk" in only:
            write_family(a.out, "loadchunk.json", header, "loadchunk", family_loadchunk(srv))
        if "large" in only:
            write_family(a.out, "large.json", header, "large", family_large(srv))
        for s in (srv, srv4):
            if not s.alive():
                raise RuntimeError("a redis-server died during recording")
    finally:
        srv.cleanup()
        srv4.cleanup()


if __name__ == "__main__":
    main()
