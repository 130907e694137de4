//! Loading: a header whose sub-filter the filter can never hold (more than
//! `u32::MAX` bytes, which `RedisCuckooFilter` refuses, like growth past 4 GiB) must be refused
//! before that sub-filter is materialized. Each case runs in a child process whose global
//! allocator (`counting_alloc`) refuses any single request over 1 GiB (Rust then aborts the
//! child), so nothing big is ever touched and a failure is reported cleanly by the parent.

use std::process::Command;

use atomic_cuckoo::redisbloom::RedisCuckooFilter;

const CHILD: &str = "ATOMIC_CUCKOO_OVERSIZED_CHILD";

/// Runs this test again in a child process and asserts that it succeeded.
fn in_child(test: &str) -> bool {
    // The test's name as the harness knows it: its module path without the crate's name.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let test = format!("{module}::{test}");
    let test = test.as_str();
    if std::env::var(CHILD).as_deref() == Ok(test) {
        return true;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, test)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{test}: the child failed ({:?}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // A name the harness does not know would run no test, and pass.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("1 passed"),
        "{test}: the child ran no test:\n{stdout}"
    );
    false
}

fn header(items: u64, buckets: u64, filters: u64, bs: u16, exp: u16) -> Vec<u8> {
    let mut h = Vec::new();
    for v in [items, buckets, 0, filters] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    for v in [bs, 20, exp] {
        h.extend_from_slice(&v.to_le_bytes());
    }
    h
}

/// One 4 GiB sub-filter (2^32 one-byte buckets), supplied as 256 chunks that all borrow the
/// same 16 MiB of zeros: `from_chunks` must refuse it without building 4 GiB first.
#[test]
fn a_4_gib_sub_filter_from_chunks_is_refused_before_it_is_built() {
    if !in_child("a_4_gib_sub_filter_from_chunks_is_refused_before_it_is_built") {
        return;
    }
    let zeros = vec![0u8; 16 << 20];
    let head = header(0, 1 << 32, 1, 1, 1);
    let mut chunks: Vec<(u64, &[u8])> = vec![(1, &head)];
    for i in 1..=256u64 {
        chunks.push((i * (16 << 20) + 1, &zeros));
    }
    let r = RedisCuckooFilter::from_chunks(chunks);
    assert!(r.is_err(), "a 4 GiB sub-filter was accepted");
    println!("refused: {:?}", r.err());
}

/// The same through `from_dump_payload`: a 49 MB LZF payload that expands to one 4 GiB
/// sub-filter (LZF's maximal ratio, all zeros).
#[test]
fn a_4_gib_sub_filter_from_an_lzf_payload_is_refused_before_it_is_built() {
    if !in_child("a_4_gib_sub_filter_from_an_lzf_payload_is_refused_before_it_is_built") {
        return;
    }
    let total: u64 = 1 << 32;
    // LZF: a literal 0, then back-references of 264 bytes at distance 1.
    let mut lzf = vec![0x00, 0x00];
    let mut produced = 1u64;
    while total - produced >= 264 {
        lzf.extend_from_slice(&[0xe0, 255, 0x00]);
        produced += 264;
    }
    let rest = total - produced;
    while produced < total {
        let n = (total - produced).min(8) as usize;
        lzf.push((n - 1) as u8);
        lzf.extend(std::iter::repeat_n(0u8, n));
        produced += n as u64;
    }
    let _ = rest;
    let mut p = vec![0x07, 0x81, 0x30, 0x16, 0xe5, 0xa2, 0x89, 0x82, 0x14, 0x04];
    for v in [1u64, total, 0, 0, 1, 20, 1] {
        p.extend_from_slice(&[0x02, 0x81]);
        p.extend_from_slice(&v.to_be_bytes());
    }
    p.extend_from_slice(&[0x02, 0x81]);
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0x05, 0xc3, 0x81]);
    p.extend_from_slice(&(lzf.len() as u64).to_be_bytes());
    p.push(0x81);
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&lzf);
    p.push(0x00);
    p.extend_from_slice(&10u16.to_le_bytes());
    let crc = crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    println!("payload: {} bytes", p.len());
    let r = RedisCuckooFilter::from_dump_payload(&p);
    assert!(r.is_err(), "a 4 GiB sub-filter was accepted");
    println!("refused: {:?}", r.err());
}

fn crc64(data: &[u8]) -> u64 {
    // Table-driven CRC-64/Jones (reflected), init 0, no xorout.
    let mut table = [0u64; 256];
    for (i, t) in table.iter_mut().enumerate() {
        let mut c = i as u64;
        for _ in 0..8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ 0x95ac_9329_ac4b_c9b5
            } else {
                c >> 1
            };
        }
        *t = c;
    }
    let mut crc = 0u64;
    for &b in data {
        crc = table[((crc ^ u64::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

#[test]
fn crc64_matches_the_spec_vector() {
    assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
}
