//! The examples' command lines, read with lexopt: `--flag value` and `--flag=value` both work,
//! `-h`/`--help` prints the usage and exits 0, and anything wrong prints one line and exits 2
//! (never a panic).
#![allow(dead_code)] // Each example uses what it needs.

use std::ffi::OsString;
use std::fmt::Display;
use std::str::FromStr;

pub use lexopt::prelude::*;
pub use lexopt::{Error, Parser};

/// Reads the command line with `read`, which returns `Ok(None)` for `--help`: then prints
/// `usage` and exits 0. On an error, prints it with a pointer to `--help` and exits 2.
pub fn parse<T>(usage: &str, read: impl FnOnce(&mut Parser) -> Result<Option<T>, Error>) -> T {
    match read(&mut Parser::from_env()) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{usage}");
            std::process::exit(0)
        }
        Err(e) => fail(format_args!("{e} (try --help)")),
    }
}

/// Prints `message` as an error on one line of stderr and exits 2.
pub fn fail(message: impl Display) -> ! {
    eprintln!("error: {message}");
    std::process::exit(2)
}

/// Parses `value`, given for `name`, as a number; `_` may separate digits (`10_000_000`).
pub fn number<T: FromStr>(value: OsString, name: &str) -> Result<T, Error>
where
    T::Err: Display,
{
    let text = value.string()?;
    text.replace('_', "")
        .parse()
        .map_err(|e| format!("bad value {text:?} for {name}: {e}").into())
}

/// SplitMix64: a tiny seedable generator, enough to pick an example's keys and operations
/// (no dependency for it).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}
