#!/usr/bin/env python3
"""Prints the throughput table and the issue's target ratios from criterion's JSON under
target/criterion: of `cargo bench --bench filters` (peers), and of `cargo bench --bench redisbloom`
(groups `rb_*`: RedisCuckooFilter against CuckooFilter, as time ratios).
Usage: python3 benches/benches/report.py [criterion_dir]"""

import json
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")
rates = {}  # (group, function) -> M elements/s, from the median
for bench in root.glob("**/new/benchmark.json"):
    meta = json.loads(bench.read_text())
    est = json.loads((bench.parent / "estimates.json").read_text())
    elements = (meta.get("throughput") or {}).get("Elements")
    if not elements:
        continue
    ns = est["median"]["point_estimate"]
    rates[(meta["group_id"], meta["function_id"])] = elements / ns * 1e3

RB = "rb_"  # the redisbloom bench's groups
peer_rates = {k: v for k, v in rates.items() if not k[0].startswith(RB)}
rb_rates = {k: v for k, v in rates.items() if k[0].startswith(RB)}
rates = peer_rates


def peers():
    groups = sorted({g for g, _ in rates})
    functions = sorted({f for _, f in rates})
    print("## Throughput (M operations/s, median of samples)\n")
    for g in groups:
        row = ", ".join(f"{f} {rates[(g, f)]:.1f}" for f in functions if (g, f) in rates)
        print(f"- `{g}`: {row}")

    OURS = "atomic-cuckoo"
    targets = []

    def ratio(name, num, den, want):
        if num in rates and den in rates:
            r = rates[num] / rates[den]
            targets.append((name, f"{rates[num]:.1f} / {rates[den]:.1f}", r, want, r >= want))
        else:
            targets.append((name, "not measured", None, want, None))

    for size in ["1M", "50M"]:
        for op in ["lookup_positive", "lookup_negative"]:
            ratio(f"{op} {size}: ours / cuckoofilter", (f"{op}/{size}", OURS), (f"{op}/{size}", "cuckoofilter"), 3.0)
        ratio(f"insert {size}: ours / cuckoofilter", (f"insert/{size}", OURS), (f"insert/{size}", "cuckoofilter"), 2.0)
        mixed2 = (f"mixed_90_10_2_threads/{size}", OURS)
        ratio(f"mixed 2 threads {size}: ours / ours 1 thread", mixed2, (f"mixed_90_10_1_threads/{size}", OURS), 1.8)
        ratio(f"mixed 2 threads {size}: ours / Mutex<cuckoofilter>", mixed2, (f"mixed_90_10_2_threads/{size}", "Mutex<cuckoofilter>"), 5.0)
        ratio(f"mixed 2 threads {size}: ours / atomic-cuckoo-filter", mixed2, (f"mixed_90_10_2_threads/{size}", "atomic-cuckoo-filter"), 2.0)
    for op in ["lookup_positive", "lookup_negative"]:
        ratio(f"{op} 50M: ours / fastbloom", (f"{op}/50M", OURS), (f"{op}/50M", "fastbloom AtomicBloomFilter"), 1.0)
        ratio(f"{op} 50M: contains_many / one at a time", (f"{op}/50M", f"{OURS} contains_many"), (f"{op}/50M", OURS), 2.0)
    ratio("lookup_positive 50M: contains_many / 2-random-reads baseline", ("lookup_positive/50M", f"{OURS} contains_many"), ("lookup_positive/50M", "baseline: 2 random reads"), 0.5)

    print("\n## Targets\n")
    print("| target | measured (M ops/s) | ratio | wanted | met |")
    print("|---|---|---:|---:|---|")
    for name, measured, r, want, met in targets:
        shown = "n/a" if r is None else f"{r:.2f}x"
        verdict = "not measured" if met is None else ("yes" if met else "**no**")
        print(f"| {name} | {measured} | {shown} | >= {want}x | {verdict} |")


def redisbloom():
    """RedisCuckooFilter's time over CuckooFilter's (default hasher), per size and operation:
    the targets are at most 1.5x for contains, 2x for inserts."""
    ref = "CuckooFilter"
    names = sorted({f for _, f in rb_rates}, key=lambda f: (f != ref, "Redis" in f, f))
    ops = ["insert", "insert_many", "contains_present", "contains_absent",
           "contains_many_present", "contains_many_absent"]
    print("## RedisCuckooFilter against CuckooFilter (M operations/s, median; time ratio to CuckooFilter)\n")
    print("| size | operation | " + " | ".join(names) + " |")
    print("|---|---|" + "---:|" * len(names))
    verdicts = []
    for size in ["1M", "50M"]:
        for op in ops:
            g = f"{RB}{op}/{size}"
            if (g, ref) not in rb_rates:
                continue
            cells = []
            for n in names:
                if (g, n) not in rb_rates:
                    cells.append("")
                    continue
                r = rb_rates[(g, ref)] / rb_rates[(g, n)]
                cells.append(f"{rb_rates[(g, n)]:.1f}" if n == ref else f"{rb_rates[(g, n)]:.1f} ({r:.2f}x)")
                if n.startswith("Redis"):
                    want = 2.0 if op.startswith("insert") else 1.5
                    verdicts.append((size, op, n, r, want))
            print(f"| {size} | {op} | " + " | ".join(cells) + " |")
    print("\n## Speed targets (time ratio RedisCuckooFilter / CuckooFilter)\n")
    print("| size | operation | filter | ratio | wanted | met |")
    print("|---|---|---|---:|---:|---|")
    for size, op, n, r, want in verdicts:
        print(f"| {size} | {op} | {n} | {r:.2f}x | <= {want}x | {'yes' if r <= want else '**no**'} |")


if peer_rates:
    peers()
if rb_rates:
    if peer_rates:
        print()
    redisbloom()
