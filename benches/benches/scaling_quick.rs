//! Throughput against thread count, for us and the peers that threads can
//! share, in one run: lookups, the 90/10 mix and inserts, at each thread count. A plain timed
//! harness (criterion would refill a 50M filter for every sample of every insert point), which
//! prints a Markdown table per size and workload and, with `--csv PATH`, the figures that
//! `plot_scaling` draws.
//!
//! ```sh
//! ATOMIC_CUCKOO_BENCH_THREADS=1,2,4,8,16 ATOMIC_CUCKOO_BENCH_SIZES=1m,50m \
//!     cargo bench -p peer-benches --bench scaling_quick -- --rounds 3 --csv scaling.csv
//! cargo run -p peer-benches --release --bin plot_scaling -- scaling.csv scaling.png
//! ```
//!
//! Workloads, each point the median of `--rounds` (default 3), every thread count once per
//! round:
//! - `insert`: `threads` threads fill a fresh filter to 95 % of our capacity, each its own share
//!   of the keys; ours also with one `insert_many` per share. The rate is keys over the wall time
//!   from the first thread's start to the last one's end.
//! - `lookup`: each thread looks up present keys from its own offset, for `--seconds` (default
//!   0.3) each.
//! - `mix`: 90 % lookups of present keys, 10 % writes (a thread's own fresh key inserted, then
//!   removed: the load stays at 90 %), for `--seconds`. Not for the Bloom filter, which cannot
//!   remove.
//!
//! Peers (`peer_benches::peers`): `atomic-cuckoo-filter`, `cuckoofilter` behind a
//! `parking_lot::Mutex` and an `RwLock` (lookups and the mix; for inserts both take the one
//! exclusive lock, so only the `Mutex` fills), and `fastbloom::AtomicBloomFilter`.

use std::hint::black_box;
use std::time::Instant;

use atomic_cuckoo::CuckooFilter;
use parking_lot::{Mutex, RwLock};

use peer_benches::peers::{acf, bloom, classic, on_threads, ours, timed_rate, Classic, Shared};
use peer_benches::{bench_threads, quick_args, quick_sizes, splitmix};

/// Fresh keys per thread for the mix's writes (cycled).
const FRESH: usize = 1 << 16;

/// One measured point.
struct Point {
    size: &'static str,
    workload: &'static str,
    peer: &'static str,
    threads: usize,
    /// M operations per second, one per round.
    rates: Vec<f64>,
}

impl Point {
    /// Records one round's rate, and prints it (progress, and the rounds' spread).
    fn log(&mut self, rate: f64) {
        self.rates.push(rate);
        println!(
            "  {} {} {} {} thr: {rate:.2}",
            self.size, self.workload, self.peer, self.threads
        );
    }

    fn median(&self) -> f64 {
        let mut r = self.rates.clone();
        r.sort_by(|a, b| a.total_cmp(b));
        r[r.len() / 2]
    }
}

/// The run's settings.
struct Run {
    rounds: usize,
    seconds: f64,
    csv: Option<String>,
    threads: Vec<usize>,
    /// `--peers`: which of `PEERS` to measure (default all).
    peers: Vec<String>,
}

/// The peer groups `--peers` picks from: ours (`insert` and `insert_many`), `atomic-cuckoo-filter`,
/// `cuckoofilter` behind the two locks, and the Bloom filter.
const PEERS: [&str; 4] = ["ours", "acf", "locked", "bloom"];

impl Run {
    fn wants(&self, peer: &str) -> bool {
        self.peers.iter().any(|p| p == peer)
    }
}

fn options() -> Run {
    let (rounds, values) = quick_args(&["--seconds", "--csv", "--peers"]);
    let mut run = Run {
        rounds,
        seconds: 0.3,
        csv: None,
        threads: bench_threads("1,2"),
        peers: PEERS.iter().map(|p| p.to_string()).collect(),
    };
    for (flag, value) in values {
        match flag.as_str() {
            "--seconds" => {
                run.seconds = value
                    .parse()
                    .ok()
                    .filter(|s: &f64| *s > 0.0)
                    .expect("--seconds S (S > 0)")
            }
            "--peers" => {
                run.peers = value.split(',').map(|p| p.trim().to_string()).collect();
                if let Some(bad) = run.peers.iter().find(|p| !PEERS.contains(&p.as_str())) {
                    panic!("--peers: unknown {bad:?} (a comma-separated list of {PEERS:?})");
                }
            }
            _ => run.csv = Some(value),
        }
    }
    run
}

/// Lookups of present keys: thread `t` starts at its own offset into `present`.
fn lookup_rate<F: Shared>(filter: &F, present: &[u64], threads: usize, seconds: f64) -> f64 {
    let stride = present.len() / threads;
    timed_rate(threads, seconds, |t, i| {
        black_box(filter.contains(&present[(t * stride + i) % present.len()]));
    })
}

/// The 90/10 mix: every tenth operation a write, inserting and then removing thread `t`'s own
/// fresh keys in turn.
fn mix_rate<F: Shared>(
    filter: &F,
    present: &[u64],
    fresh: &[Vec<u64>],
    threads: usize,
    seconds: f64,
) -> f64 {
    let stride = present.len() / threads;
    timed_rate(threads, seconds, |t, i| {
        if i % 10 == 9 {
            let key = &fresh[t][(i / 20) % FRESH];
            if (i / 10) % 2 == 0 {
                black_box(filter.insert(key));
            } else {
                black_box(filter.remove(key));
            }
        } else {
            black_box(filter.contains(&present[(t * stride + i) % present.len()]));
        }
    })
}

/// Fills `filter` from `threads` threads, each its own share of `keys` (`many`: one call per
/// share instead of one insert per key); M inserts per second, and how many went in.
fn fill_rate<F: Shared>(
    filter: &F,
    keys: &[u64],
    threads: usize,
    many: Option<fn(&F, &[u64]) -> usize>,
) -> (f64, usize) {
    let shares: Vec<&[u64]> = keys.chunks(keys.len().div_ceil(threads)).collect();
    let (spent, stored) = on_threads(threads, |t| {
        let share = shares.get(t).copied().unwrap_or(&[]);
        match many {
            Some(insert_many) => insert_many(filter, share),
            None => share.iter().filter(|k| filter.insert(k)).count(),
        }
    });
    (
        keys.len() as f64 / spent.as_secs_f64() / 1e6,
        stored.iter().sum(),
    )
}

/// Ours, all of a share in one `insert_many` call; how many went in.
fn ours_many(f: &CuckooFilter, keys: &[u64]) -> usize {
    match f.insert_many(keys) {
        Ok(()) => keys.len(),
        Err(e) => panic!("insert_many at 95 % of capacity failed: {e}"),
    }
}

/// Measures every workload of one peer at one size; returns its points.
struct Sizing<'a> {
    label: &'static str,
    items: usize,
    /// Keys inserted: 95 % of our capacity.
    keys: &'a [u64],
    fresh: &'a [Vec<u64>],
    run: &'a Run,
}

impl Sizing<'_> {
    /// The insert points of `peer` (fresh filters from `build`); the filter the last round at
    /// the most threads filled, for the lookup points.
    fn fill<F: Shared>(
        &self,
        peer: &'static str,
        build: impl Fn(usize) -> F,
        many: Option<fn(&F, &[u64]) -> usize>,
        points: &mut Vec<Point>,
    ) -> F {
        let mut kept = None;
        self.measure("insert", peer, points, |threads| {
            let filter = build(self.items);
            let (rate, stored) = fill_rate(&filter, self.keys, threads, many);
            if stored * 100 < self.keys.len() * 99 {
                println!(
                    "  note: {peer} stored {stored} of {} keys at {threads} threads",
                    self.keys.len(),
                );
            }
            kept = Some(filter);
            rate
        });
        kept.expect("at least one round and one thread count")
    }

    /// Lookup points and, when `mix`, mix points (at 90 %: the last 5/95 of the keys leave
    /// first and come back after) of a filled filter.
    fn read<F: Shared>(&self, peer: &'static str, filter: &F, mix: bool, points: &mut Vec<Point>) {
        let seconds = self.run.seconds;
        self.measure("lookup", peer, points, |threads| {
            lookup_rate(filter, self.keys, threads, seconds)
        });
        if !mix {
            return;
        }
        let keep = self.keys.len() * 90 / 95;
        for k in &self.keys[keep..] {
            filter.remove(k);
        }
        let present = &self.keys[..keep];
        self.measure("mix", peer, points, |threads| {
            mix_rate(filter, present, self.fresh, threads, seconds)
        });
        for k in &self.keys[keep..] {
            filter.insert(k);
        }
    }

    /// `--rounds` rounds of `rate(threads)` for each thread count in turn (so the last call is
    /// at the most threads); one point per thread count.
    fn measure(
        &self,
        workload: &'static str,
        peer: &'static str,
        points: &mut Vec<Point>,
        mut rate: impl FnMut(usize) -> f64,
    ) {
        let mut rows: Vec<Point> = self
            .run
            .threads
            .iter()
            .map(|&threads| self.point(workload, peer, threads))
            .collect();
        for _ in 0..self.run.rounds {
            for row in rows.iter_mut() {
                row.log(rate(row.threads));
            }
        }
        points.append(&mut rows);
    }

    fn point(&self, workload: &'static str, peer: &'static str, threads: usize) -> Point {
        Point {
            size: self.label,
            workload,
            peer,
            threads,
            rates: Vec::new(),
        }
    }
}

/// One Markdown table per size and workload: a row per peer, a column per thread count, and
/// the most threads' rate over one thread's.
fn print_tables(points: &[Point], threads: &[usize]) {
    let mut groups: Vec<(&str, &str)> = points.iter().map(|p| (p.size, p.workload)).collect();
    groups.dedup();
    for (size, workload) in groups {
        println!("\n| {workload}, {size} (M ops/s) | {} | most / 1 |", {
            let t: Vec<String> = threads.iter().map(|t| format!("{t} thr")).collect();
            t.join(" | ")
        });
        println!("|---|{}---:|", "---:|".repeat(threads.len()));
        let rows = points
            .iter()
            .filter(|p| p.size == size && p.workload == workload);
        let mut peers: Vec<&str> = rows.clone().map(|p| p.peer).collect();
        peers.dedup();
        for peer in peers {
            let rates: Vec<f64> = rows
                .clone()
                .filter(|p| p.peer == peer)
                .map(Point::median)
                .collect();
            let cells: Vec<String> = rates.iter().map(|r| format!("{r:.1}")).collect();
            let ratio = match (rates.first(), rates.last()) {
                (Some(one), Some(most)) if *one > 0.0 => format!("{:.2}×", most / one),
                _ => "-".into(),
            };
            println!("| {peer} | {} | {ratio} |", cells.join(" | "));
        }
    }
}

fn write_csv(path: &str, points: &[Point]) {
    let mut out = String::from("size,workload,peer,threads,median_mops,rounds\n");
    for p in points {
        let rounds: Vec<String> = p.rates.iter().map(|r| format!("{r:.3}")).collect();
        out.push_str(&format!(
            "{},{},{},{},{:.3},{}\n",
            p.size,
            p.workload,
            p.peer,
            p.threads,
            p.median(),
            rounds.join(" ")
        ));
    }
    std::fs::write(path, out).unwrap_or_else(|e| panic!("writing {path}: {e}"));
}

fn main() {
    let run = options();
    println!(
        "threads {:?}, {} rounds, {} s per timed point, {} CPUs available",
        run.threads,
        run.rounds,
        run.seconds,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let max_threads = run.threads.iter().copied().max().unwrap_or(1);
    let fresh: Vec<Vec<u64>> = (0..max_threads)
        .map(|t| splitmix(0xF4E5_0000 + t as u64, FRESH))
        .collect();
    let mut points = Vec::new();
    for (items, label) in quick_sizes() {
        let keys = splitmix(0x5CA1_0013, ours(items).slots() * 95 / 100);
        let size = Sizing {
            label,
            items,
            keys: &keys,
            fresh: &fresh,
            run: &run,
        };
        let started = Instant::now();
        let size_start = points.len();
        if run.wants("ours") {
            drop(size.fill("atomic-cuckoo", ours, None, &mut points));
            let filter = size.fill(
                "atomic-cuckoo insert_many",
                ours,
                Some(ours_many),
                &mut points,
            );
            size.read("atomic-cuckoo", &filter, true, &mut points);
        }
        if run.wants("acf") {
            let filter = size.fill("atomic-cuckoo-filter", acf, None, &mut points);
            size.read("atomic-cuckoo-filter", &filter, true, &mut points);
        }
        if run.wants("locked") {
            let filter = size.fill(
                "Mutex<cuckoofilter>",
                |n| Mutex::new(classic(n)),
                None,
                &mut points,
            );
            size.read("Mutex<cuckoofilter>", &filter, true, &mut points);
            let filter: RwLock<Classic> = RwLock::new(filter.into_inner());
            size.read("RwLock<cuckoofilter>", &filter, true, &mut points);
        }
        if run.wants("bloom") {
            let filter = size.fill("fastbloom AtomicBloomFilter", bloom, None, &mut points);
            size.read("fastbloom AtomicBloomFilter", &filter, false, &mut points);
        }
        println!(
            "{label}: measured in {:.0} s",
            started.elapsed().as_secs_f64()
        );
        // Each size's tables as soon as it is done (a long run cut short keeps what it has),
        // grouped by workload in a fixed order (the sort is stable: peers and thread counts
        // keep theirs).
        let this_size = &mut points[size_start..];
        this_size.sort_by_key(|p| {
            ["lookup", "mix", "insert"]
                .iter()
                .position(|w| *w == p.workload)
        });
        print_tables(this_size, &run.threads);
        if let Some(path) = &run.csv {
            write_csv(path, &points);
            println!("\nwrote {path}");
        }
    }
}
