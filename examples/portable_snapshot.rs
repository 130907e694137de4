//! Writes or checks a snapshot made with the default (portable) hasher, so that two builds of
//! this crate (say one with `-C target-cpu=native` and one without) can each load the other's.
//!
//! ```sh
//! cargo run --release --example portable_snapshot -- write /tmp/a.snapshot
//! cargo run --release --example portable_snapshot -- check /tmp/a.snapshot
//! ```

mod common;

use std::process::ExitCode;

use atomic_cuckoo::CuckooFilter;
use common::{Long, Short, Value, ValueExt};

const USAGE: &str = "\
Usage: portable_snapshot (write|check) PATH

  write PATH    save a probe filter, made with the default (portable) hasher, to PATH
  check PATH    load PATH and check that it equals the probe filter built here, byte for byte
  -h, --help    print this help

Write with one build of this crate (say with `-C target-cpu=native`) and check with another.
Run it with `cargo run --release --example portable_snapshot -- write|check PATH`.";

/// Reads `(write|check) PATH`: whether to write, and the path.
fn parse_args() -> (bool, String) {
    common::parse(USAGE, |p| {
        let (mut mode, mut path) = (None, None);
        while let Some(arg) = p.next()? {
            match arg {
                Short('h') | Long("help") => return Ok(None),
                Value(v) if mode.is_none() => mode = Some(v.string()?),
                Value(v) if path.is_none() => path = Some(v.string()?),
                _ => return Err(arg.unexpected()),
            }
        }
        let (Some(mode), Some(path)) = (mode, path) else {
            return Err("expected a mode (write or check) and a PATH".into());
        };
        match mode.as_str() {
            "write" | "check" => Ok(Some((mode == "write", path))),
            _ => Err(format!("unknown mode {mode:?}: write or check").into()),
        }
    })
}

/// Items of the probe filter: integers and strings, in a filter that grows (so the snapshot
/// holds a doubled table).
fn fill(filter: &CuckooFilter) {
    for i in 0..20_000u64 {
        filter.insert(&i).expect("the probe filter grows");
        filter
            .insert(&format!("user:{i}"))
            .expect("the probe filter grows");
    }
}

fn probe_filter() -> CuckooFilter {
    CuckooFilter::builder()
        .capacity(5_000)
        .growable(true)
        .build()
        .expect("valid parameters")
}

fn main() -> ExitCode {
    let (write, path) = parse_args();
    if write {
        let filter = probe_filter();
        fill(&filter);
        if let Err(e) = std::fs::write(&path, filter.to_bytes()) {
            eprintln!("writing {path}: {e}");
            return ExitCode::FAILURE;
        }
        println!(
            "wrote {path}: {} items, {} doublings",
            filter.len(),
            filter.doublings()
        );
        return ExitCode::SUCCESS;
    }
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("reading {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let restored = match CuckooFilter::from_bytes(&bytes) {
        Ok(filter) => filter,
        Err(e) => {
            eprintln!("{path} does not load here: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The same filter built here must be byte for byte the one loaded.
    let here = probe_filter();
    fill(&here);
    let missing = (0..20_000u64)
        .filter(|i| !restored.contains(i) || !restored.contains(&format!("user:{i}")))
        .count();
    if missing > 0 || here.to_bytes() != bytes {
        eprintln!("{path} loaded, but {missing} items are missing or the bytes differ");
        return ExitCode::FAILURE;
    }
    println!("{path} loads here and equals this build's filter byte for byte");
    ExitCode::SUCCESS
}
