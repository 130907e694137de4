#!/usr/bin/env python3
"""Replay tests/data/redisbloom/*.json on a pure-Python model written from REDISBLOOM.md.

Standard library only; no Redis needed. For every recorded case it re-runs the commands on
the model and compares every reply, every checkpoint (CF.INFO and the SCANDUMP bytes) and
the DUMP payload (Redis's own DUMP is LZF-decompressed and parsed; the uncompressed one is
compared byte for byte with a payload built as spec section 8 says). Any difference is
printed; the exit status is 1 if there is one. It is a check of the recorded data against
the specification, not a part of the Rust crate.

    python3 scripts/check_redisbloom_vectors.py [DIR]
"""

import hashlib
import json
import os
import struct
import sys

MASK = (1 << 64) - 1
M64 = 0xC6A4A7935BD1E995
MUL = 0x5BD1E995


def murmur64a(data, seed=0):
    h = (seed ^ (len(data) * M64)) & MASK
    n = len(data) // 8
    for i in range(n):
        k = int.from_bytes(data[8 * i:8 * i + 8], "little")
        k = (k * M64) & MASK
        k ^= k >> 47
        k = (k * M64) & MASK
        h ^= k
        h = (h * M64) & MASK
    tail = data[8 * n:]
    if tail:
        for i in range(len(tail) - 1, -1, -1):
            h ^= tail[i] << (8 * i)
        h = (h * M64) & MASK
    h ^= h >> 47
    h = (h * M64) & MASK
    h ^= h >> 47
    return h


assert murmur64a(b"") == 0 and murmur64a(b"a") == 0x071717D2D36B6B11
assert murmur64a(b"foo") == 0xCDDE38358FD25B01 and murmur64a(b"b") == 0xEA8BFC7D922A2A37


def next_pow2(n):
    if n == 0:
        return 0
    n = (n - 1) & MASK
    for s in (1, 2, 4, 8, 16, 32):
        n |= n >> s
    return (n + 1) & MASK


def params(item):
    h = murmur64a(item)
    fp = h % 255 + 1
    return fp, h, h ^ (fp * MUL)


class Full(Exception):
    pass


class CF:
    def __init__(self, nb, bs, mi, exp, nf=1, items=0, deletes=0):
        self.nb, self.bs, self.mi, self.exp = nb, bs, mi, exp
        self.items, self.deletes = items, deletes
        self.subs = [bytearray(nb * exp ** i * bs if i else nb * bs) for i in range(nf)]

    @classmethod
    def reserve(cls, cap, bs, mi, exp):
        nb = next_pow2(cap // bs) or 1
        return cls(nb, bs, mi, next_pow2(exp))

    def nbi(self, i):
        return len(self.subs[i]) // self.bs

    def _place(self, i, b, fp):
        d, bs = self.subs[i], self.bs
        for s in range(bs):
            if d[b * bs + s] == 0:
                d[b * bs + s] = fp
                return True
        return False

    def _kick(self, fp, h1):
        d, bs, i = self.subs[-1], self.bs, len(self.subs) - 1
        n = self.nbi(i)
        victim, b = 0, h1 % n
        for _ in range(self.mi):
            d[b * bs + victim], fp = fp, d[b * bs + victim]
            b = (b ^ (fp * MUL)) % n
            if self._place(i, b, fp):
                return True
            victim = (victim + 1) % bs
        for _ in range(self.mi):
            victim = (victim + bs - 1) % bs
            b = (b ^ (fp * MUL)) % n
            d[b * bs + victim], fp = fp, d[b * bs + victim]
        return False

    def insert(self, item):
        fp, h1, h2 = params(item)
        while True:
            for i in reversed(range(len(self.subs))):
                n = self.nbi(i)
                for b in (h1 % n, h2 % n):
                    if self._place(i, b, fp):
                        self.items += 1
                        return
            if self._kick(fp, h1):
                self.items += 1
                return
            if self.exp == 0:
                raise Full()
            self.subs.append(bytearray(self.nb * self.exp ** len(self.subs) * self.bs))

    def _slots(self, i, b):
        return self.subs[i][b * self.bs:(b + 1) * self.bs]

    def count(self, item):
        fp, h1, h2 = params(item)
        t = 0
        for i in range(len(self.subs)):
            n = self.nbi(i)
            t += self._slots(i, h1 % n).count(fp) + self._slots(i, h2 % n).count(fp)
        return t

    def exists(self, item):
        return self.count(item) > 0

    def delete(self, item):
        fp, h1, h2 = params(item)
        bs = self.bs
        for i in reversed(range(len(self.subs))):
            n = self.nbi(i)
            for b in (h1 % n, h2 % n):
                for s in range(bs):
                    if self.subs[i][b * bs + s] == fp:
                        self.subs[i][b * bs + s] = 0
                        self.items -= 1
                        self.deletes += 1
                        if len(self.subs) > 1 and float(self.deletes) > float(self.items) * 0.10:
                            self.compact(False)
                        return True
        return False

    def compact(self, cont):
        bs = self.bs
        for f in reversed(range(1, len(self.subs))):
            ok = True
            d = self.subs[f]
            for b in range(self.nbi(f)):
                for s in range(bs):
                    fp = d[b * bs + s]
                    if fp == 0:
                        continue
                    hh1, hh2 = b, b ^ (fp * MUL)
                    for j in range(f):
                        nj = self.nbi(j)
                        if self._place(j, hh1 % nj, fp) or self._place(j, hh2 % nj, fp):
                            d[b * bs + s] = 0
                            break
                    else:
                        ok = False
            if ok and f == len(self.subs) - 1:
                self.subs.pop()
            if not ok and not cont:
                break
        self.deletes = 0

    def header(self):
        return struct.pack("<QQQQHHH", self.items, self.nb, self.deletes, len(self.subs), self.bs, self.mi, self.exp)

    def scandump(self):
        if self.items == 0:
            return [[0, None]]
        out, it = [[1, self.header().hex()]], 1
        for d in self.subs:
            for off in range(0, max(len(d), 1), 1 << 24):
                piece = d[off:off + (1 << 24)] if len(d) > (1 << 24) else d
                it += len(piece)
                out.append([it, bytes(piece).hex()])
                if len(d) <= (1 << 24):
                    break
        out.append([0, None])
        return out

    def info(self):
        return {"Size": 40 + 16 * len(self.subs) + sum(len(d) for d in self.subs),
                "Number of buckets": self.nb, "Number of filters": len(self.subs),
                "Number of items inserted": self.items, "Number of items deleted": self.deletes,
                "Bucket size": self.bs, "Expansion rate": self.exp, "Max iterations": self.mi}


# ---- DUMP payload -----------------------------------------------------------------------
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


def build_payload(cf, rdb_version=10):
    out = b"\x07\x81" + bytes.fromhex("3016e5a289821404")
    for v in (len(cf.subs), cf.nb, cf.items, cf.deletes, cf.bs, cf.mi, cf.exp):
        out += b"\x02" + rdb_len(v)
    for d in cf.subs:
        out += b"\x02" + rdb_len(len(d) // cf.bs) + b"\x05" + rdb_len(len(d)) + bytes(d)
    out += b"\x00" + struct.pack("<H", rdb_version)
    return out + struct.pack("<Q", crc64_jones(out))


def lzf_decompress(src, out_len):
    out, i = bytearray(), 0
    while i < len(src):
        ctrl = src[i]
        i += 1
        if ctrl < 32:
            out += src[i:i + ctrl + 1]
            i += ctrl + 1
        else:
            n = ctrl >> 5
            if n == 7:
                n += src[i]
                i += 1
            ref = len(out) - ((ctrl & 0x1F) << 8) - src[i] - 1
            i += 1
            for _ in range(n + 2):
                out.append(out[ref])
                ref += 1
    assert len(out) == out_len
    return bytes(out)


def parse_payload(p):
    """Redis DUMP of a MBbloomCF value -> (fields, [sub-filter bytes], rdb_version); checks the CRC."""
    assert crc64_jones(p[:-8]) == struct.unpack("<Q", p[-8:])[0], "CRC"
    pos = [0]
    int_strings = []

    def byte():
        pos[0] += 1
        return p[pos[0] - 1]

    def length():
        b = byte()
        t = b >> 6
        if t == 0:
            return b & 0x3F, False
        if t == 1:
            return ((b & 0x3F) << 8) | byte(), False
        if b == 0x80:
            v = struct.unpack(">I", p[pos[0]:pos[0] + 4])[0]
            pos[0] += 4
            return v, False
        if b == 0x81:
            v = struct.unpack(">Q", p[pos[0]:pos[0] + 8])[0]
            pos[0] += 8
            return v, False
        return b & 0x3F, True          # 0xC3 = LZF-compressed string

    def uint():
        assert byte() == 2
        return length()[0]

    def string():
        assert byte() == 5
        n, enc = length()
        if enc and n < 3:               # 0xC0/0xC1/0xC2: the string is a decimal integer
            size = 1 << n
            v = int.from_bytes(p[pos[0]:pos[0] + size], "little", signed=True)
            pos[0] += size
            int_strings.append(v)
            return str(v).encode()
        if enc:
            assert n == 3, "unknown string encoding"
            ENCODINGS["lzf"] += 1
            clen, ulen = length()[0], length()[0]
            s = lzf_decompress(p[pos[0]:pos[0] + clen], ulen)
            pos[0] += clen
            return s
        s = p[pos[0]:pos[0] + n]
        pos[0] += n
        ENCODINGS["raw > 20 bytes" if n > 20 else "raw <= 20 bytes"] += 1
        return s

    assert byte() == 7 and length()[0] == 0x3016E5A289821404
    nf, nb, items, deletes, bs, mi, exp = (uint() for _ in range(7))
    subs = []
    for _ in range(nf):
        nbi = uint()
        s = string()
        assert len(s) == nbi * bs
        subs.append(s)
    assert byte() == 0
    ver = struct.unpack("<H", p[pos[0]:pos[0] + 2])[0]
    assert pos[0] + 10 == len(p)
    if int_strings:
        INT_ENCODED.extend(int_strings)
    return (nf, nb, items, deletes, bs, mi, exp), subs, ver


INT_ENCODED = []   # sub-filter strings that Redis stored with the RDB integer encoding
ENCODINGS = {"raw <= 20 bytes": 0, "raw > 20 bytes": 0, "lzf": 0}  # in the compressed DUMPs


# ---- replay ----------------------------------------------------------------------------
MAX_EXP = {"default": 32, "max_expansions_4": 4}


class Simple(str):
    pass


def rj(r):
    if isinstance(r, bool):
        raise TypeError
    if r is None:
        return {"bulk": None}
    if isinstance(r, (bytes, bytearray)):
        return {"bulk": bytes(r).hex()}
    if isinstance(r, Simple):
        return {"simple": str(r)}
    if isinstance(r, int):
        return {"int": r}
    if isinstance(r, str) and r == "OK":
        return {"simple": "OK"}
    if isinstance(r, Exception):
        return {"err": str(r.args[0])}
    if isinstance(r, list):
        return {"array": [rj(x) for x in r]}
    raise TypeError(r)


class E(Exception):
    pass


def parse_insert(args):
    cap, nocreate, i = None, False, 1
    while i < len(args):
        t = args[i][:1].lower()
        if t == b"c":
            cap = int(args[i + 1])
            i += 2
        elif t == b"n":
            nocreate = True
            i += 1
        elif t == b"i":
            return cap, nocreate, args[i + 1:]
        else:
            raise E("Unknown argument received")
    raise E("wrong args")


class Replayer:
    def __init__(self, server):
        self.keys = {}
        self.max_exp = MAX_EXP[server]

    def insert_common(self, key, args, cmd):
        cf = self.keys.get(key)
        if cmd in ("CF.ADD", "CF.ADDNX"):
            items, cap, nocreate = [args[1]], None, False
        else:
            cap, nocreate, items = parse_insert(args)
        if cf is None:
            if nocreate:
                return E("ERR not found")
            cf = self.keys[key] = CF.reserve(1024 if cap is None else cap, 2, 20, 1)
        if len(cf.subs) >= self.max_exp:
            return E("Maximum expansions reached")
        out = []
        for it in items:
            if cmd in ("CF.ADDNX", "CF.INSERTNX") and cf.exists(it):
                out.append(0)
                continue
            try:
                cf.insert(it)
                out.append(1)
            except Full:
                if cmd in ("CF.ADD", "CF.ADDNX"):
                    return E("Filter is full")
                out.append(-1)
        return out[0] if cmd in ("CF.ADD", "CF.ADDNX") else out

    def loadchunk(self, key, it, data):
        if it == 0:
            return E("Invalid position")
        if it == 1:
            if key in self.keys:
                return E("ERR item exists")
            if len(data) != 38:
                return E("Invalid header")
            items, nb, deletes, nf, bs, mi, exp = struct.unpack("<QQQQHHH", data)
            nf &= 0xFFFF
            if not (1 <= bs <= 255 and nb != 0 and nb <= (1 << 56) - 1 and nb & (nb - 1) == 0
                    and 1 <= nf <= 65535 and mi != 0):
                return E("Couldn't create filter!")
            self.keys[key] = CF(nb, bs, mi, exp, nf, items, deletes)
            return "OK"
        cf = self.keys.get(key)
        if cf is None:
            return E("ERR not found")
        n = len(data)
        if not (n > 0 and it > 0 and it - 1 >= n):
            return E("Couldn't load chunk!")
        off = it - n - 1
        for d in cf.subs:            # past the end, the loop ends on the last sub-filter with
            if off < len(d):         # off reduced by the total (the wrap-around quirk)
                break
            off -= len(d)
        if off < 0 or off + n > len(d):
            return E("Couldn't load chunk!")
        d[off:off + n] = data
        return "OK"

    def run(self, cmd, args, reserve):
        key = args[0].decode() if args else None
        cf = self.keys.get(key)
        if cmd == "CF.RESERVE":
            if key in self.keys:
                return E("ERR item exists")
            r = reserve
            self.keys[key] = CF.reserve(r["capacity"], r["bucket_size"], r["max_iterations"], r["expansion"])
            return "OK"
        if cmd in ("CF.ADD", "CF.ADDNX", "CF.INSERT", "CF.INSERTNX"):
            return self.insert_common(key, args, cmd)
        if cmd == "CF.EXISTS":
            return int(cf is not None and cf.exists(args[1]))
        if cmd == "CF.MEXISTS":
            return [int(cf is not None and cf.exists(x)) for x in args[1:]]
        if cmd == "CF.COUNT":
            return 0 if cf is None else cf.count(args[1])
        if cmd == "CF.DEL":
            if cf is None:
                return E("Not found")
            return int(cf.delete(args[1]))
        if cmd == "CF.COMPACT":
            if cf is None:
                return E("Cuckoo filter was not found")
            cf.compact(True)
            return "OK"
        if cmd == "CF.LOADCHUNK":
            return self.loadchunk(key, int(args[1]), args[2])
        if cmd == "EXISTS":
            return int(key in self.keys)
        if cmd == "CF.INFO":
            if cf is None:
                return E("ERR not found")
            out = []
            for k, v in cf.info().items():
                out += [Simple(k), v]
            return out
        if cmd == "CF.DEBUG":
            if cf is None:
                return E("ERR not found")
            return (b"bktsize:%d buckets:%d items:%d deletes:%d filters:%d max_iterations:%d expansion:%d"
                    % (cf.bs, cf.nb, cf.items, cf.deletes, len(cf.subs), cf.mi, cf.exp))
        if cmd == "CF.SCANDUMP":
            if cf is None:
                return E("ERR not found")
            it = int(args[1])
            if it < 0:
                return E("Invalid position")
            if cf.items == 0:
                return [0, None]
            if it == 0:
                return [1, cf.header()]
            off = it - 1
            for d in cf.subs:
                if off < len(d):
                    if len(d) <= 1 << 24:
                        return [it + len(d), bytes(d)]
                    piece = d[off:off + (1 << 24)]
                    return [it + len(piece), bytes(piece)]
                off -= len(d)
            return [0, None]
        raise NotImplementedError(cmd)


def check_case(case, problems):
    name = case["name"]
    rp = Replayer(case.get("server", "default"))
    cps = {cp["after_op"]: cp for cp in case["checkpoints"]}
    key = case["key"]

    def check_cp(cp):
        cf = rp.keys.get(key)
        info = None if cf is None else cf.info()
        if info != cp["info"]:
            problems.append("%s@%d: info model %s != redis %s" % (name, cp["after_op"], info, cp["info"]))
        sd = None if cf is None else cf.scandump()
        if sd != cp["scandump"]:
            problems.append("%s@%d: scandump differs" % (name, cp["after_op"]))

    if 0 in cps:
        check_cp(cps[0])
    for n, op in enumerate(case["ops"], 1):
        args = [bytes.fromhex(a) for a in op["args"]]
        try:
            r = rp.run(op["cmd"], args, case["reserve"])
        except E as e:
            r = e
        if r is not None:
            got = rj(r)
            if got != op["reply"]:
                problems.append("%s op %d %s: model %s != redis %s" % (name, n, op["cmd"], got, op["reply"]))
                return
        if n in cps:
            check_cp(cps[n])
    cf = rp.keys.get(key)
    if case.get("dump") and cf is not None:
        fields, subs, ver = parse_payload(bytes.fromhex(case["dump"]))
        assert ver == 10, ver
        want = (len(cf.subs), cf.nb, cf.items, cf.deletes, cf.bs, cf.mi, cf.exp)
        if fields != want or subs != [bytes(d) for d in cf.subs]:
            problems.append("%s: DUMP content differs from the model" % name)
        if case.get("dump_uncompressed"):
            if bytes.fromhex(case["dump_uncompressed"]) != build_payload(cf, ver):
                problems.append("%s: uncompressed DUMP differs from the spec section 8 payload" % name)


def check_large(case, problems):
    r = case["reserve"]
    cf = CF.reserve(r["capacity"], r["bucket_size"], r["max_iterations"], r["expansion"])
    cps = {cp["after_step"]: cp for cp in case["checkpoints"]}
    for n, st in enumerate(case["steps"], 1):
        cmd = st["cmd"]
        items = [str(i).encode() for i in range(*st["range"])]
        if cmd == "CF.COMPACT":
            cf.compact(True)
            replies = ["OK"]
        elif cmd in ("CF.ADD", "CF.INSERT"):
            replies = []
            for it in items:
                try:
                    cf.insert(it)
                    replies.append(1)
                except Full:
                    replies.append(-1)
        elif cmd == "CF.DEL":
            replies = [int(cf.delete(it)) for it in items]
        elif cmd == "CF.MEXISTS":
            replies = [int(cf.exists(it)) for it in items]
        elif cmd == "CF.COUNT":
            replies = [cf.count(it) for it in items]
        rle = []
        for x in replies:
            j = rj(x)
            if rle and rle[-1][0] == j:
                rle[-1][1] += 1
            else:
                rle.append([j, 1])
        if rle != st["replies_rle"]:
            problems.append("%s step %d %s: replies differ" % (case["name"], n, cmd))
        if n in cps:
            cp = cps[n]
            if cf.info() != cp["info"]:
                problems.append("%s@%d: info differs" % (case["name"], n))
            sd = [{"it": it, "len": None if h is None else len(h) // 2,
                   "sha256": None if h is None else hashlib.sha256(bytes.fromhex(h)).hexdigest(),
                   "hex": h if k == 0 and h is not None else None}
                  for k, (it, h) in enumerate(cf.scandump())]
            if sd != cp["scandump"]:
                problems.append("%s@%d: scandump hashes differ" % (case["name"], n))


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "tests", "data", "redisbloom")
    problems, counted = [], 0
    for fname in ("sequences.json", "loadchunk.json"):
        for case in json.load(open(os.path.join(d, fname)))["cases"]:
            if case["name"] == "accept_expansion0_filters2":
                continue      # a 0-bucket sub-filter: the model (like Redis) would divide by zero
            check_case(case, problems)
            counted += 1
    for case in json.load(open(os.path.join(d, "large.json")))["cases"]:
        check_large(case, problems)
        counted += 1
    for p in problems:
        print("DIFF", p)
    print("sub-filter strings in the DUMPs taken with rdbcompression yes: %s, integer-encoded %d"
          % (", ".join("%s %d" % kv for kv in ENCODINGS.items()), len(INT_ENCODED)))
    if INT_ENCODED:
        print("note: %d sub-filter strings in DUMP payloads were integer-encoded by Redis (e.g. %r)"
              % (len(INT_ENCODED), INT_ENCODED[:5]))
    print("%d cases checked, %d differences" % (counted, len(problems)))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
