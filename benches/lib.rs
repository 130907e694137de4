//! Helpers shared by the benchmarks in `benches/` (`cargo bench -p peer-benches --bench filters`,
//! then `python3 benches/benches/report.py`); nothing to use outside them.

pub mod peers;
pub mod redisbloom;
pub mod selection;

/// `n` keys from SplitMix64 seeded with `seed`: the same keys for every filter and every run.
pub fn splitmix(seed: u64, n: usize) -> Vec<u64> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        })
        .collect()
}

/// The sizes the quick benches (`grown_quick`, `fill_quick`) run at: `ATOMIC_CUCKOO_BENCH_SIZES`,
/// comma-separated `1m` and `50m` (default `1m`).
pub fn quick_sizes() -> Vec<(usize, &'static str)> {
    bench_sizes("1m")
}

/// The sizes of `ATOMIC_CUCKOO_BENCH_SIZES` (`default` when unset), comma-separated `1m` and
/// `50m`: the item counts, and their labels in benchmark ids (`1M`, `50M`).
pub fn bench_sizes(default: &str) -> Vec<(usize, &'static str)> {
    let wanted = std::env::var("ATOMIC_CUCKOO_BENCH_SIZES").unwrap_or_else(|_| default.into());
    wanted
        .split(',')
        .map(|s| match s.trim() {
            "1m" => (1_000_000, "1M"),
            "50m" => (50_000_000, "50M"),
            other => panic!("unknown size {other:?} (1m, 50m)"),
        })
        .collect()
}

/// Thread counts for the threaded measurements: `ATOMIC_CUCKOO_BENCH_THREADS`, comma-separated
/// (`default` when unset).
pub fn bench_threads(default: &str) -> Vec<usize> {
    std::env::var("ATOMIC_CUCKOO_BENCH_THREADS")
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|t| {
            t.trim()
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .expect("ATOMIC_CUCKOO_BENCH_THREADS: thread counts, e.g. 1,2,4")
        })
        .collect()
}

/// The quick benches' arguments: `--rounds N` (default 3), and each flag named in `extra` with
/// its value. Panics on anything else (cargo's own `--bench` is skipped).
pub fn quick_args(extra: &[&str]) -> (usize, Vec<(String, String)>) {
    let mut args = std::env::args().skip(1);
    let (mut rounds, mut values) = (3, Vec::new());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bench" => {}
            "--rounds" => {
                rounds = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("--rounds N")
            }
            flag if extra.contains(&flag) => {
                let value = args
                    .next()
                    .unwrap_or_else(|| panic!("{flag} needs a value"));
                values.push((flag.to_string(), value));
            }
            other => panic!("unknown argument {other:?}"),
        }
    }
    (rounds, values)
}

/// The value of a quick bench's count flag (`--items 1_000_000`): a positive number, `_`
/// allowed between digits; anything else stops the bench with the flag's usage.
pub fn positive_count(flag: &str, value: &str) -> usize {
    value
        .replace('_', "")
        .parse()
        .ok()
        .filter(|&n| n > 0)
        .unwrap_or_else(|| panic!("{flag} N (N > 0)"))
}

/// The cells of the named columns of a CSV file (the plots' input), row by row, in the order of
/// `names`: columns are found by their name in the header line, others are ignored. No quoting:
/// cells are what lies between commas. Errors name the file, and the line where a row has too
/// few cells.
pub fn csv_columns<const N: usize>(
    path: &str,
    names: [&str; N],
) -> Result<Vec<[String; N]>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .ok_or(format!("{path}: empty"))?
        .split(',')
        .collect();
    let mut columns = [0; N];
    for (column, name) in columns.iter_mut().zip(names) {
        *column = header
            .iter()
            .position(|h| *h == name)
            .ok_or(format!("{path}: no column {name:?}"))?;
    }
    lines
        .enumerate()
        .map(|(n, line)| {
            let cells: Vec<&str> = line.split(',').collect();
            let mut row: [String; N] = std::array::from_fn(|_| String::new());
            for (cell, &column) in row.iter_mut().zip(&columns) {
                *cell = cells
                    .get(column)
                    .ok_or(format!("{path}:{}: too few cells", n + 2))?
                    .to_string();
            }
            Ok(row)
        })
        .collect()
}

/// The plots' font: the TrueType file after `--font`, taken out of `args`, else Debian's
/// DejaVu Sans.
pub fn plot_font_arg(args: &mut Vec<String>) -> Result<String, String> {
    let Some(i) = args.iter().position(|a| a == "--font") else {
        return Ok("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf".into());
    };
    let font = args.get(i + 1).ok_or("--font needs a path")?.clone();
    args.drain(i..i + 2);
    Ok(font)
}

/// Registers the TrueType file `font` as plotters' "sans-serif". Errors name the file.
pub fn register_plot_font(font: &str) -> Result<(), String> {
    // plotters keeps the font for the rest of the program.
    let bytes: &'static [u8] = Box::leak(
        std::fs::read(font)
            .map_err(|e| format!("{font}: {e}"))?
            .into_boxed_slice(),
    );
    plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, bytes)
        .map_err(|_| format!("{font}: not a font plotters can read"))
}
