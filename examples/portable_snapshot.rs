//! Writes or checks a snapshot made with the default (portable) hasher, so that two builds of
//! this crate (say one with `-C target-cpu=native` and one without) can each load the other's.
//!
//! ```sh
//! cargo run --release --example portable_snapshot -- write /tmp/a.snapshot
//! cargo run --release --example portable_snapshot -- check /tmp/a.snapshot
//! ```

use std::process::ExitCode;

use atomic_cuckoo::CuckooFilter;

/// Items of the probe filter: integers and strings, in a filter that grows (so several levels).
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
        .expansion(2)
        .build()
        .expect("valid parameters")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, path) = match args.as_slice() {
        [mode, path] if mode == "write" || mode == "check" => (mode.as_str(), path),
        _ => {
            eprintln!("usage: portable_snapshot (write|check) PATH");
            return ExitCode::from(2);
        }
    };
    if mode == "write" {
        let filter = probe_filter();
        fill(&filter);
        if let Err(e) = std::fs::write(path, filter.to_bytes()) {
            eprintln!("writing {path}: {e}");
            return ExitCode::FAILURE;
        }
        println!(
            "wrote {path}: {} items, {} levels",
            filter.len(),
            filter.levels()
        );
        return ExitCode::SUCCESS;
    }
    let bytes = match std::fs::read(path) {
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
