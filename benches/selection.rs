//! Which benchmarks a criterion command line selects, checked before anything is measured.
//!
//! Criterion runs the benchmarks whose id (`group/function`) matches the name filter on its
//! command line and silently skips the rest, so a filter that matches nothing builds, fills its
//! filters, measures nothing and exits 0. [`criterion_main`] stands in for criterion's
//! `criterion_group!`/`criterion_main!`: given every id the binary measures, it refuses such a
//! filter (exit code 2, the filter and the binary's ids on stderr) before any setup, and takes
//! a filter that matches only when case is ignored (`lookup_negative/1m`, the size spelled as
//! `ATOMIC_CUCKOO_BENCH_SIZES` spells it) as matching those ids.

use criterion::{BenchmarkFilter, Criterion};
use regex::RegexBuilder;

/// Criterion's options that take a value (criterion 0.8's command line): their value is not
/// the name filter.
const OPTIONS_WITH_VALUE: &[&str] = &[
    "-c",
    "--color",
    "--colour",
    "-s",
    "--save-baseline",
    "-b",
    "--baseline",
    "--baseline-lenient",
    "--format",
    "--profile-time",
    "--load-baseline",
    "--sample-size",
    "--warm-up-time",
    "--measurement-time",
    "--nresamples",
    "--noise-threshold",
    "--confidence-level",
    "--significance-level",
    "--plotting-backend",
    "--output-format",
];

/// The name filter of a command line, as criterion reads it.
struct NameFilter {
    /// The first positional argument: a regular expression, or with `--exact` an id.
    pattern: String,
    exact: bool,
}

impl NameFilter {
    /// The filter among the arguments (the program name excluded); `None` when there is none
    /// or `--ignored` rejects every benchmark anyway.
    fn from_args(args: impl IntoIterator<Item = String>) -> Option<NameFilter> {
        let (mut pattern, mut exact, mut ignored) = (None, false, false);
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--" => {
                    pattern = pattern.or(args.next());
                    break;
                }
                "--exact" => exact = true,
                "--ignored" => ignored = true,
                option if OPTIONS_WITH_VALUE.contains(&option) => {
                    args.next();
                }
                option if option.starts_with('-') => {}
                _ => pattern = pattern.or(Some(arg)),
            }
        }
        let pattern = pattern.filter(|_| !ignored)?;
        Some(NameFilter { pattern, exact })
    }

    /// The filter as criterion applies it (an unanchored regular expression search, or
    /// equality with `--exact`), optionally ignoring case.
    fn to_benchmark_filter(&self, ignore_case: bool) -> BenchmarkFilter {
        if self.exact && !ignore_case {
            return BenchmarkFilter::Exact(self.pattern.clone());
        }
        let pattern = if self.exact {
            format!("^{}$", regex::escape(&self.pattern))
        } else {
            self.pattern.clone()
        };
        // criterion has already refused a pattern that is not a regular expression.
        let regex = RegexBuilder::new(&pattern)
            .case_insensitive(ignore_case)
            .build()
            .unwrap_or_else(|e| panic!("{:?}: {e}", self.pattern));
        BenchmarkFilter::Regex(regex)
    }
}

/// Whether criterion runs the benchmark `id` under `filter` (criterion's own test is private).
fn filter_matches(filter: &BenchmarkFilter, id: &str) -> bool {
    match filter {
        BenchmarkFilter::AcceptAll => true,
        BenchmarkFilter::Regex(regex) => regex.is_match(id),
        BenchmarkFilter::Exact(exact) => id == exact,
        BenchmarkFilter::RejectAll => false,
    }
}

/// The benchmarks a command line selects, for a binary to skip the setup of benchmarks that
/// will not run.
pub struct Selection {
    filter: BenchmarkFilter,
}

impl Selection {
    /// Whether the benchmark `id` (`group/function`) runs.
    pub fn wants(&self, id: &str) -> bool {
        filter_matches(&self.filter, id)
    }
}

/// The `main` of a criterion benchmark binary named `binary`: configures criterion from the
/// command line, checks its name filter against `ids` (every benchmark id `run` measures, in
/// the sizes and thread counts the environment asks for), then calls `run` and prints
/// criterion's summary.
///
/// A filter that matches no id stops the program with exit code 2 before `run`, naming the
/// filter and listing the ids; one that matches only ignoring case runs those ids, and says so.
pub fn criterion_main(binary: &str, ids: &[String], run: impl FnOnce(&mut Criterion, &Selection)) {
    let mut criterion = Criterion::default().configure_from_args();
    let mut selection = Selection {
        filter: BenchmarkFilter::AcceptAll,
    };
    if let Some(name_filter) = NameFilter::from_args(std::env::args().skip(1)) {
        let ignore_case = ignore_case_or_exit(binary, &name_filter, ids);
        criterion = criterion.with_benchmark_filter(name_filter.to_benchmark_filter(ignore_case));
        selection.filter = name_filter.to_benchmark_filter(ignore_case);
    }
    run(&mut criterion, &selection);
    criterion.final_summary();
}

/// Whether `filter` selects its benchmarks among `ids` only when case is ignored (and says so);
/// exits with code 2 and the ids where it selects none either way.
fn ignore_case_or_exit(binary: &str, filter: &NameFilter, ids: &[String]) -> bool {
    let count = |ignore_case| {
        let filter = filter.to_benchmark_filter(ignore_case);
        ids.iter().filter(|id| filter_matches(&filter, id)).count()
    };
    if count(false) > 0 {
        return false;
    }
    let matched = count(true);
    if matched == 0 {
        eprintln!(
            "error: {binary}: the filter {:?}{} matches none of its {} benchmark ids \
             (`group/function`; which sizes and thread counts they name depends on the \
             ATOMIC_CUCKOO_BENCH_* variables the bench's docs describe):\n  {}",
            filter.pattern,
            if filter.exact { " (--exact)" } else { "" },
            ids.len(),
            ids.join("\n  ")
        );
        std::process::exit(2);
    }
    eprintln!(
        "{binary}: the filter {:?} matches {matched} benchmark ids only when case is ignored: \
         running those",
        filter.pattern
    );
    true
}
