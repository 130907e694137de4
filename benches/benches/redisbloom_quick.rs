//! The RedisBloom comparison of `benches/redisbloom.rs` as a plain timed loop: every contender
//! once per round, rounds interleaved (so that a noisy stretch of a shared machine hits every
//! contender alike), best and median of the rounds. Faster than criterion at 50M items, where a
//! fill takes seconds.
//!
//! ```sh
//! cargo bench -p peer-benches --bench redisbloom_quick -- --rounds 3
//! ATOMIC_CUCKOO_BENCH_SIZES=1m cargo bench -p peer-benches --bench redisbloom_quick -- \
//!     --only "CuckooFilter,Redis bs2" --ops contains_present,contains_absent
//! ```
//!
//! `--profile NAME --ops OP` fills one contender untimed and runs `OP` once, for a profiler:
//!
//! ```sh
//! ATOMIC_CUCKOO_BENCH_SIZES=1m valgrind --tool=callgrind --toggle-collect='*redisbloom::hits*' \
//!     target/release/deps/redisbloom_quick-<hash> --profile "Redis bs2" --ops contains_absent
//! ```
//!
//! counts the instructions of the lookups alone (`hits` runs them; divide by the keys probed).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use peer_benches::redisbloom::{
    describe, each_contender, fill, fill_many, hits, hits_many, sizes, Contender, Size, Visit,
    OPERATIONS, REFERENCE,
};

struct Options {
    rounds: usize,
    only: Option<Vec<String>>,
    ops: Vec<String>,
    profile: bool,
}

fn options() -> Options {
    let mut o = Options {
        rounds: 3,
        only: None,
        ops: OPERATIONS.iter().map(|s| s.to_string()).collect(),
        profile: false,
    };
    let mut args = std::env::args().skip(1);
    let list = |s: String| {
        s.split(',')
            .map(|s| s.trim().to_string())
            .collect::<Vec<_>>()
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bench" => {}
            "--rounds" => {
                o.rounds = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("--rounds N")
            }
            "--only" => o.only = Some(list(args.next().expect("--only NAME,NAME"))),
            "--profile" => {
                o.only = Some(vec![args.next().expect("--profile NAME")]);
                o.profile = true;
                o.rounds = 1;
            }
            "--ops" => o.ops = list(args.next().expect("--ops OP,OP")),
            other => panic!("unknown argument {other:?}"),
        }
    }
    for op in &o.ops {
        assert!(
            OPERATIONS.contains(&op.as_str()),
            "unknown operation {op:?}"
        );
    }
    o
}

/// Seconds of each round, per (operation, contender).
type Times = BTreeMap<(String, &'static str), Vec<f64>>;

struct Round<'a> {
    size: &'a Size,
    options: &'a Options,
    first: bool,
    order: Vec<&'static str>,
    times: Times,
}

impl Round<'_> {
    fn wants(&self, op: &str) -> bool {
        self.options.ops.iter().any(|o| o == op)
    }

    fn record(&mut self, op: &str, name: &'static str, run: impl FnOnce() -> usize) {
        if !self.wants(op) {
            return;
        }
        let start = Instant::now();
        black_box(run());
        let spent = start.elapsed().as_secs_f64();
        self.times
            .entry((op.to_string(), name))
            .or_default()
            .push(spent);
    }
}

impl Visit for Round<'_> {
    fn visit<F: Contender>(&mut self, name: &'static str) {
        if let Some(only) = &self.options.only {
            if !only.iter().any(|o| o == name) {
                return;
            }
        }
        if self.first {
            self.order.push(name);
        }
        let size = self.size;
        let profile = self.options.profile;
        {
            let filter = F::build(size.items);
            let stored = if profile && !self.wants("insert") {
                fill(&filter, &size.insert)
            } else {
                let mut stored = 0;
                self.record("insert", name, || {
                    stored = fill(&filter, &size.insert);
                    stored
                });
                stored
            };
            if self.first && !profile {
                println!("{}", describe(name, size, &filter, stored));
            }
            self.record("contains_present", name, || hits(&filter, size.present()));
            self.record("contains_absent", name, || hits(&filter, &size.absent));
            let mut results = Vec::with_capacity(size.present().len());
            self.record("contains_many_present", name, || {
                hits_many(&filter, size.present(), &mut results)
            });
            self.record("contains_many_absent", name, || {
                hits_many(&filter, &size.absent, &mut results)
            });
        }
        if self.wants("insert_many") {
            let filter = F::build(size.items);
            self.record("insert_many", name, || fill_many(&filter, &size.insert));
        }
    }
}

fn median(xs: &[f64]) -> f64 {
    let mut xs = xs.to_vec();
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn best(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(f64::INFINITY, f64::min)
}

fn main() {
    let options = options();
    for size in sizes() {
        let mut round = Round {
            size: &size,
            options: &options,
            first: true,
            order: Vec::new(),
            times: Times::new(),
        };
        for _ in 0..options.rounds {
            each_contender(&mut round);
            round.first = false;
        }
        if options.profile {
            continue;
        }
        println!(
            "\n{} items, best / median of {} rounds: M operations/s; time ratio to {REFERENCE} (best, median)\n",
            size.label, options.rounds
        );
        println!("| operation | filter | best M/s | median M/s | ratio (best) | ratio (median) |");
        println!("|---|---|---:|---:|---:|---:|");
        for op in &options.ops {
            let reference = round.times.get(&(op.clone(), REFERENCE));
            for &name in &round.order {
                let Some(t) = round.times.get(&(op.clone(), name)) else {
                    continue;
                };
                let ops = match op.as_str() {
                    "insert" | "insert_many" => size.insert.len(),
                    "contains_present" | "contains_many_present" => size.present().len(),
                    _ => size.absent.len(),
                } as f64;
                let (b, m) = (best(t), median(t));
                let (rb, rm) =
                    reference.map_or((f64::NAN, f64::NAN), |r| (b / best(r), m / median(r)));
                println!(
                    "| {op} | {name} | {:.1} | {:.1} | {rb:.2}x | {rm:.2}x |",
                    ops / b / 1e6,
                    ops / m / 1e6
                );
            }
        }
    }
}
