//! An independent, deliberately simple serial model of RedisBloom's cuckoo filter, written
//! from `shared/REDISBLOOM.md` and RedisBloom's `cuckoo.c` (one `Vec<u8>` per sub-filter),
//! plus helpers for the tests that check against it.
#![allow(dead_code)]

use std::sync::mpsc;
use std::time::Duration;

/// MurmurHash64A, seed 0 (Appleby), written byte by byte.
pub fn murmur(key: &[u8]) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    let mut h: u64 = (key.len() as u64).wrapping_mul(M);
    let n = key.len() / 8;
    for i in 0..n {
        let mut k = 0u64;
        for j in 0..8 {
            k |= (key[i * 8 + j] as u64) << (8 * j);
        }
        k = k.wrapping_mul(M);
        k ^= k >> 47;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = &key[n * 8..];
    let rem = key.len() & 7;
    if rem > 0 {
        for j in (0..rem).rev() {
            h ^= (tail[j] as u64) << (8 * j);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 47;
    h = h.wrapping_mul(M);
    h ^= h >> 47;
    h
}

pub const MUL: u64 = 0x5bd1_e995;

/// `(fp, h1, h2)` of an item.
pub fn params(item: &[u8]) -> (u8, u64, u64) {
    let h = murmur(item);
    let fp = (h % 255 + 1) as u8;
    (fp, h, h ^ (fp as u64).wrapping_mul(MUL))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MErr {
    Full,
    MaxExp,
}

/// The serial model.
#[derive(Clone, Debug)]
pub struct Model {
    pub nb: u64,
    pub bs: usize,
    pub max_iter: u16,
    pub expansion: u64,
    pub max_exp: u64,
    pub subs: Vec<Vec<u8>>,
    pub items: u64,
    pub deletes: u64,
}

pub fn next_pow2(n: u64) -> u64 {
    let mut n = n.wrapping_sub(1);
    n |= n >> 1;
    n |= n >> 2;
    n |= n >> 4;
    n |= n >> 8;
    n |= n >> 16;
    n |= n >> 32;
    n.wrapping_add(1)
}

impl Model {
    pub fn reserve(cap: u64, bs: u64, max_iter: u64, expansion: u64, max_exp: u64) -> Model {
        let mut nb = next_pow2(cap / bs);
        if nb == 0 {
            nb = 1;
        }
        Model {
            nb,
            bs: bs as usize,
            max_iter: max_iter as u16,
            expansion: next_pow2(expansion),
            max_exp,
            subs: vec![vec![0u8; (nb as usize) * bs as usize]],
            items: 0,
            deletes: 0,
        }
    }

    pub fn sub_nb(&self, i: usize) -> u64 {
        self.subs[i].len() as u64 / self.bs as u64
    }

    fn find_avail(&self, sub: usize, h1: u64, h2: u64) -> Option<usize> {
        let nb = self.sub_nb(sub);
        for h in [h1, h2] {
            let base = (h % nb) as usize * self.bs;
            for s in 0..self.bs {
                if self.subs[sub][base + s] == 0 {
                    return Some(base + s);
                }
            }
        }
        None
    }

    fn ko_insert(&mut self, fp: u8, h1: u64) -> bool {
        let last = self.subs.len() - 1;
        let nb = self.sub_nb(last);
        let bs = self.bs;
        let mut fp = fp;
        let mut victim = 0usize;
        let mut ii = h1 % nb;
        let data = &mut self.subs[last];
        for _ in 0..self.max_iter {
            std::mem::swap(&mut data[ii as usize * bs + victim], &mut fp);
            ii = (ii ^ (fp as u64).wrapping_mul(MUL)) % nb;
            let base = ii as usize * bs;
            if let Some(s) = (0..bs).find(|&s| data[base + s] == 0) {
                data[base + s] = fp;
                return true;
            }
            victim = (victim + 1) % bs;
        }
        for _ in 0..self.max_iter {
            victim = (victim + bs - 1) % bs;
            ii = (ii ^ (fp as u64).wrapping_mul(MUL)) % nb;
            std::mem::swap(&mut data[ii as usize * bs + victim], &mut fp);
        }
        false
    }

    fn grow(&mut self) {
        let n = self.subs.len() as u32;
        let growth = self.expansion.pow(n);
        let nb = self.nb * growth;
        self.subs.push(vec![0u8; nb as usize * self.bs]);
    }

    fn insert_fp(&mut self, fp: u8, h1: u64, h2: u64) -> Result<(), MErr> {
        loop {
            for i in (0..self.subs.len()).rev() {
                if let Some(at) = self.find_avail(i, h1, h2) {
                    self.subs[i][at] = fp;
                    self.items += 1;
                    return Ok(());
                }
            }
            if self.ko_insert(fp, h1) {
                self.items += 1;
                return Ok(());
            }
            if self.expansion == 0 {
                return Err(MErr::Full);
            }
            self.grow();
        }
    }

    pub fn check_exp(&self) -> Result<(), MErr> {
        if self.subs.len() as u64 >= self.max_exp {
            Err(MErr::MaxExp)
        } else {
            Ok(())
        }
    }

    /// CF.ADD
    pub fn insert(&mut self, item: &[u8]) -> Result<(), MErr> {
        self.check_exp()?;
        let (fp, h1, h2) = params(item);
        self.insert_fp(fp, h1, h2)
    }

    /// CF.ADDNX
    pub fn insert_unique(&mut self, item: &[u8]) -> Result<bool, MErr> {
        self.check_exp()?;
        if self.contains(item) {
            return Ok(false);
        }
        let (fp, h1, h2) = params(item);
        self.insert_fp(fp, h1, h2).map(|()| true)
    }

    /// CF.INSERT: `None` = error before any item.
    pub fn insert_many(&mut self, items: &[Vec<u8>]) -> Result<Vec<bool>, MErr> {
        self.check_exp()?;
        Ok(items
            .iter()
            .map(|it| {
                let (fp, h1, h2) = params(it);
                self.insert_fp(fp, h1, h2).is_ok()
            })
            .collect())
    }

    /// CF.INSERTNX
    pub fn insert_many_unique(&mut self, items: &[Vec<u8>]) -> Result<Vec<Option<bool>>, MErr> {
        self.check_exp()?;
        Ok(items
            .iter()
            .map(|it| {
                if self.contains(it) {
                    return Some(false);
                }
                let (fp, h1, h2) = params(it);
                match self.insert_fp(fp, h1, h2) {
                    Ok(()) => Some(true),
                    Err(_) => None,
                }
            })
            .collect())
    }

    pub fn contains(&self, item: &[u8]) -> bool {
        let (fp, h1, h2) = params(item);
        (0..self.subs.len()).any(|i| {
            let nb = self.sub_nb(i);
            [h1, h2].iter().any(|h| {
                let base = (h % nb) as usize * self.bs;
                self.subs[i][base..base + self.bs].contains(&fp)
            })
        })
    }

    pub fn count(&self, item: &[u8]) -> u64 {
        let (fp, h1, h2) = params(item);
        let mut n = 0;
        for i in 0..self.subs.len() {
            let nb = self.sub_nb(i);
            for h in [h1, h2] {
                let base = (h % nb) as usize * self.bs;
                n += self.subs[i][base..base + self.bs]
                    .iter()
                    .filter(|&&b| b == fp)
                    .count() as u64;
            }
        }
        n
    }

    /// CF.DEL
    pub fn remove(&mut self, item: &[u8]) -> bool {
        let (fp, h1, h2) = params(item);
        for i in (0..self.subs.len()).rev() {
            let nb = self.sub_nb(i);
            for h in [h1, h2] {
                let base = (h % nb) as usize * self.bs;
                if let Some(s) = (0..self.bs).find(|&s| self.subs[i][base + s] == fp) {
                    self.subs[i][base + s] = 0;
                    self.items -= 1;
                    self.deletes += 1;
                    if self.subs.len() > 1 && (self.deletes as f64) > (self.items as f64) * 0.10 {
                        self.compact(false);
                    }
                    return true;
                }
            }
        }
        false
    }

    fn relocate(&mut self, f: usize, b: u64, s: usize) -> i32 {
        let fp = self.subs[f][b as usize * self.bs + s];
        if fp == 0 {
            return 0; // empty
        }
        let h1 = b;
        let h2 = b ^ (fp as u64).wrapping_mul(MUL);
        for j in 0..f {
            if let Some(at) = self.find_avail(j, h1, h2) {
                self.subs[j][at] = fp;
                self.subs[f][b as usize * self.bs + s] = 0;
                return 1; // ok
            }
        }
        -1 // fail
    }

    fn compact_single(&mut self, f: usize) -> bool {
        let nb = self.sub_nb(f);
        let mut ok = true;
        for b in 0..nb {
            for s in 0..self.bs {
                if self.relocate(f, b, s) == -1 {
                    ok = false;
                }
            }
        }
        if ok && f == self.subs.len() - 1 {
            self.subs.pop();
        }
        ok
    }

    /// CF.COMPACT (`cont` = true) or the automatic one.
    pub fn compact(&mut self, cont: bool) {
        let n = self.subs.len();
        let mut ii = n;
        while ii > 1 {
            if !self.compact_single(ii - 1) && !cont {
                break;
            }
            ii -= 1;
        }
        self.deletes = 0;
    }

    pub fn header(&self) -> Vec<u8> {
        let mut h = Vec::with_capacity(38);
        h.extend_from_slice(&self.items.to_le_bytes());
        h.extend_from_slice(&self.nb.to_le_bytes());
        h.extend_from_slice(&self.deletes.to_le_bytes());
        h.extend_from_slice(&(self.subs.len() as u64).to_le_bytes());
        h.extend_from_slice(&(self.bs as u16).to_le_bytes());
        h.extend_from_slice(&self.max_iter.to_le_bytes());
        h.extend_from_slice(&(self.expansion as u16).to_le_bytes());
        h
    }

    /// Every SCANDUMP reply with data.
    pub fn scandump(&self) -> Vec<(u64, Vec<u8>)> {
        if self.items == 0 {
            return Vec::new();
        }
        let mut out = vec![(1u64, self.header())];
        let mut it = 1u64;
        const MAX: usize = 16 << 20;
        for d in &self.subs {
            let mut off = 0;
            while off < d.len() {
                let n = MAX.min(d.len() - off);
                it += n as u64;
                out.push((it, d[off..off + n].to_vec()));
                off += n;
            }
        }
        out
    }

    /// CF.INFO Size.
    pub fn info_size(&self) -> u64 {
        40 + self.subs.iter().map(|d| 16 + d.len() as u64).sum::<u64>()
    }

    pub fn occupied(&self) -> u64 {
        self.subs
            .iter()
            .map(|d| d.iter().filter(|&&b| b != 0).count() as u64)
            .sum()
    }
}

/// Runs `f` on a thread and panics if it does not finish within `secs` (a deadlock or
/// livelock); the stuck thread is left behind.
pub fn with_timeout<T: Send + 'static>(
    name: &str,
    secs: u64,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            let r = f();
            let _ = tx.send(());
            r
        })
        .unwrap();
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => handle.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Ok(v) => v,
            Err(e) => std::panic::resume_unwind(e),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{name}: did not finish within {secs} s (deadlock or livelock)")
        }
    }
}

/// Occupied slot bytes in a SCANDUMP (header excluded).
pub fn dump_occupied(chunks: &[(u64, Vec<u8>)]) -> u64 {
    chunks
        .iter()
        .skip(1)
        .map(|(_, d)| d.iter().filter(|&&b| b != 0).count() as u64)
        .sum()
}

/// `numItems` from a SCANDUMP header.
pub fn dump_items(chunks: &[(u64, Vec<u8>)]) -> u64 {
    chunks
        .first()
        .map(|(_, h)| u64::from_le_bytes(h[0..8].try_into().unwrap()))
        .unwrap_or(0)
}

/// Parses a SCANDUMP into `(nb, bs, sub-filter bytes)` (empty dump: `None`).
pub fn parse_dump(chunks: &[(u64, Vec<u8>)]) -> Option<(u64, usize, Vec<Vec<u8>>)> {
    let (_, h) = chunks.first()?;
    let nb = u64::from_le_bytes(h[8..16].try_into().unwrap());
    let nf = u64::from_le_bytes(h[24..32].try_into().unwrap()) as usize;
    let bs = u16::from_le_bytes([h[32], h[33]]) as usize;
    let exp = u16::from_le_bytes([h[36], h[37]]) as u64;
    let stream: Vec<u8> = chunks.iter().skip(1).flat_map(|(_, d)| d.clone()).collect();
    let mut subs = Vec::new();
    let mut at = 0usize;
    for i in 0..nf {
        let len = (nb * exp.pow(i as u32)) as usize * bs; // 0^0 = 1
        subs.push(stream[at..at + len].to_vec());
        at += len;
    }
    assert_eq!(at, stream.len(), "stream length");
    Some((nb, bs, subs))
}

/// Asserts that the filter bytes are exactly a placement of `items` (a multiset): as many
/// occupied slots as items, and each item matched to its own slot holding its fingerprint in
/// one of its two buckets of some sub-filter (a perfect bipartite matching).
pub fn assert_exact_placement(chunks: &[(u64, Vec<u8>)], items: &[Vec<u8>], ctx: &str) {
    let Some((_, bs, subs)) = parse_dump(chunks) else {
        assert!(
            items.is_empty(),
            "{ctx}: empty dump but {} items",
            items.len()
        );
        return;
    };
    let occupied: usize = subs
        .iter()
        .map(|d| d.iter().filter(|&&b| b != 0).count())
        .sum();
    assert_eq!(
        occupied,
        items.len(),
        "{ctx}: {occupied} occupied slots for {} live items",
        items.len()
    );
    assert_eq!(
        dump_items(chunks),
        items.len() as u64,
        "{ctx}: header items"
    );
    // Candidate slots of each item: (sub, byte offset) ids.
    let mut offsets = Vec::new();
    let mut acc = 0usize;
    for d in &subs {
        offsets.push(acc);
        acc += d.len();
    }
    let cands: Vec<Vec<usize>> = items
        .iter()
        .map(|it| {
            let (fp, h1, h2) = params(it);
            let mut c = Vec::new();
            for (i, d) in subs.iter().enumerate() {
                let nb = (d.len() / bs) as u64;
                let (b1, b2) = (h1 % nb, h2 % nb);
                let buckets = if b1 == b2 { vec![b1] } else { vec![b1, b2] };
                for b in buckets {
                    for s in 0..bs {
                        let at = b as usize * bs + s;
                        if d[at] == fp {
                            c.push(offsets[i] + at);
                        }
                    }
                }
            }
            c
        })
        .collect();
    let mut owner: Vec<Option<usize>> = vec![None; acc];
    fn try_kuhn(
        u: usize,
        cands: &[Vec<usize>],
        seen: &mut [bool],
        owner: &mut [Option<usize>],
    ) -> bool {
        for &v in &cands[u] {
            if seen[v] {
                continue;
            }
            seen[v] = true;
            if owner[v].is_none() || try_kuhn(owner[v].unwrap(), cands, seen, owner) {
                owner[v] = Some(u);
                return true;
            }
        }
        false
    }
    for (u, item) in items.iter().enumerate() {
        let mut seen = vec![false; acc];
        assert!(
            try_kuhn(u, &cands, &mut seen, &mut owner),
            "{ctx}: item {item:02x?} (fp {}) has no slot of its own",
            params(item).0
        );
    }
}
