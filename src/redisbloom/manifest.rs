//! A sharded filter's names in Redis: the filter's name, its shard keys, and the manifest (a
//! string at the name) that says which generation of shard keys readers use. Written out for
//! other languages in `docs/SHARDED.md`.

use super::cluster_slot::{key_slot, tag_for_slot};
use super::sharded::MAX_SHARDS;

/// The manifest's first line: the format and its version.
const MAGIC: &str = "atomic-cuckoo sharded filter v1";

/// Longest filter name, in bytes.
pub(crate) const MAX_NAME_LEN: usize = 200;

/// Redis Cluster's hash slots.
const SLOTS: u64 = 16_384;

/// Whether `name` can name a sharded filter: 1 to 200 bytes of printable ASCII other than
/// `{` and `}`, so that its keys are text, carry no hash tag of their own, and fit one line.
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'{' && b != b'}')
}

/// The slot that shard `shard` of `shards` aims at: the middle of its `1/shards` of the slot
/// space, so that the shards spread evenly over the slots, and over masters that hold equal
/// ranges of them.
pub(crate) fn shard_slot(shard: usize, shards: usize) -> u16 {
    ((2 * shard as u64 + 1) * SLOTS / (2 * shards as u64)) as u16
}

/// The key of shard `shard` of `shards` in generation `generation` of filter `name`:
/// `name:generation:shard:{tag}`, the tag the shortest lower-case hex number whose slot is
/// `shard_slot`.
pub(crate) fn shard_key(name: &str, generation: u64, shard: usize, shards: usize) -> String {
    let tag = tag_for_slot(shard_slot(shard, shards));
    let tag = String::from_utf8(tag).expect("hex digits");
    format!("{name}:{generation}:{shard}:{{{tag}}}")
}

/// A manifest: which generation of shard keys is the filter, and those keys in shard order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub(crate) generation: u64,
    pub(crate) keys: Vec<String>,
}

impl Manifest {
    /// The manifest of generation `generation` of filter `name`, with `shards` shards.
    pub(crate) fn new(name: &str, generation: u64, shards: usize) -> Manifest {
        Manifest {
            generation,
            keys: (0..shards)
                .map(|s| shard_key(name, generation, s, shards))
                .collect(),
        }
    }

    /// The manifest's text, as stored at the filter's name.
    pub(crate) fn to_text(&self) -> String {
        let head = format!(
            "{MAGIC}\ngeneration {}\nshards {}\n",
            self.generation,
            self.keys.len()
        );
        with_keys(head, &self.keys)
    }

    /// Reads the manifest of filter `name`; `Err` says what is wrong with it. Its keys must be
    /// the ones the rule gives for its generation and shard count: a reader trusts no other.
    pub(crate) fn parse(text: &[u8], name: &str) -> Result<Manifest, String> {
        let mut lines = lines_after(text, MAGIC)?;
        let generation = number(lines.next(), "generation")?;
        let shards = number(lines.next(), "shards")?;
        if !(1..=MAX_SHARDS as u64).contains(&shards) {
            return Err(format!("{shards} shards (1 to {MAX_SHARDS})"));
        }
        let manifest = Manifest::new(name, generation, shards as usize);
        for (shard, want) in manifest.keys.iter().enumerate() {
            match lines.next() {
                Some(key) if key == want => {}
                Some(key) => return Err(format!("shard {shard}'s key is {key:?}, not {want:?}")),
                None => return Err(format!("fewer than {shards} shard keys")),
            }
        }
        end_of_text(lines)?;
        Ok(manifest)
    }

    /// The cluster slot of shard `shard`'s key.
    pub(crate) fn slot(&self, shard: usize) -> u16 {
        key_slot(self.keys[shard].as_bytes())
    }
}

/// `head`, then each key on a line of its own: a manifest's or a ledger's text.
fn with_keys(mut head: String, keys: &[String]) -> String {
    for key in keys {
        head.push_str(key);
        head.push('\n');
    }
    head
}

/// The lines of `text` after its first, which must be `magic`.
fn lines_after<'t>(text: &'t [u8], magic: &str) -> Result<std::str::Split<'t, char>, String> {
    let text = std::str::from_utf8(text).map_err(|_| "not UTF-8 text".to_owned())?;
    let mut lines = text.split('\n');
    if lines.next() != Some(magic) {
        return Err(format!("its first line is not {magic:?}"));
    }
    Ok(lines)
}

/// `field N` (a decimal number) on `line`.
fn number(line: Option<&str>, field: &str) -> Result<u64, String> {
    line.and_then(|l| l.strip_prefix(field))
        .and_then(|l| l.strip_prefix(' '))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("no {field:?} line"))
}

/// After the last line: its newline, or nothing.
fn end_of_text<'t>(rest: impl Iterator<Item = &'t str>) -> Result<(), String> {
    let rest: Vec<&str> = rest.collect();
    if rest.is_empty() || rest == [""] {
        Ok(())
    } else {
        Err("text after the last line".to_owned())
    }
}

/// The ledger's first line.
const LEDGER_MAGIC: &str = "atomic-cuckoo sharded filter ledger v1";

/// The ledger of filter `name`: `{name}:ledger`, in the manifest's hash slot (the tag is the
/// name, which the manifest key hashes whole), so that one transaction writes both.
pub(crate) fn ledger_key(name: &str) -> String {
    format!("{{{name}}}:ledger")
}

/// What exports owe the cluster: the highest generation one started, and the shard keys that
/// exports wrote or retired and that may still lack an expiry, other than the manifest's. An
/// export names its new keys here before it writes them, so every key without an expiry is
/// the manifest's or the ledger's, whatever fails when.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ledger {
    pub(crate) started: u64,
    pub(crate) keys: Vec<String>,
}

impl Ledger {
    pub(crate) fn to_text(&self) -> String {
        with_keys(
            format!("{LEDGER_MAGIC}\nstarted {}\n", self.started),
            &self.keys,
        )
    }

    /// Reads the ledger of filter `name`: every key must be one of its shard keys (an export
    /// gives each an expiry).
    pub(crate) fn parse(text: &[u8], name: &str) -> Result<Ledger, String> {
        let mut lines = lines_after(text, LEDGER_MAGIC)?;
        let started = number(lines.next(), "started")?;
        let keys: Vec<String> = lines
            .filter(|line| !line.is_empty())
            .map(str::to_owned)
            .collect();
        if let Some(key) = keys.iter().find(|key| !is_shard_key_of(key, name, started)) {
            return Err(format!("{key:?} is not a shard key of {name:?}"));
        }
        Ok(Ledger { started, keys })
    }
}

/// Whether `key` is a shard key of filter `name` in a generation up to `started`, as exports
/// write them: `name:G:s:{tag}` with `G` and `s` decimal (no leading zeros) and `tag` the
/// smallest hex number of its slot.
fn is_shard_key_of(key: &str, name: &str, started: u64) -> bool {
    let Some(rest) = key.strip_prefix(name).and_then(|r| r.strip_prefix(':')) else {
        return false;
    };
    let mut parts = rest.splitn(3, ':');
    let decimal = |p: Option<&str>| {
        p.filter(|p| *p == "0" || (!p.starts_with('0') && !p.is_empty()))
            .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u64>().ok())
    };
    let (generation, shard, tag) = (decimal(parts.next()), decimal(parts.next()), parts.next());
    let tag = tag
        .and_then(|t| t.strip_prefix('{'))
        .and_then(|t| t.strip_suffix('}'));
    match (generation, shard, tag) {
        (Some(generation), Some(shard), Some(tag)) => {
            generation <= started
                && shard < MAX_SHARDS as u64
                && tag.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
                && tag_for_slot(key_slot(tag.as_bytes())) == tag.as_bytes()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redisbloom::cluster_slot::reference_slot;

    #[test]
    fn names_are_printable_ascii_without_braces() {
        for good in ["ids", "a", "users:v2", "x-y_z.1", &"n".repeat(MAX_NAME_LEN)] {
            assert!(valid_name(good), "{good:?}");
        }
        for bad in [
            "",
            "a b",
            "a{b",
            "a}b",
            "tab\t",
            "line\n",
            "é",
            &"n".repeat(MAX_NAME_LEN + 1),
        ] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    /// Every shard key lands in the slot aimed at (by the specification's slot function), and
    /// the aimed slots split the slot space into equal parts: three shards land on three
    /// masters that `redis-cli --cluster create` gives 0-5460, 5461-10922 and 10923-16383.
    #[test]
    fn shard_keys_land_in_evenly_spread_slots() {
        for shards in [1, 2, 3, 5, 16, 1000, MAX_SHARDS] {
            let mut previous = None;
            for s in 0..shards {
                let key = shard_key("ids", 7, s, shards);
                assert_eq!(
                    reference_slot(key.as_bytes()),
                    shard_slot(s, shards),
                    "{key}"
                );
                let slot = u64::from(shard_slot(s, shards));
                assert!(slot * shards as u64 / SLOTS == s as u64, "{s} of {shards}");
                assert!(previous < Some(slot));
                previous = Some(slot);
            }
        }
        let masters = [0..=5460, 5461..=10922, 10923..=16383];
        for (s, range) in masters.iter().enumerate() {
            assert!(range.contains(&shard_slot(s, 3)), "shard {s}");
        }
        assert_eq!(shard_key("ids", 7, 0, 1), "ids:7:0:{8209}");
    }

    #[test]
    fn manifests_read_back_and_refuse_damage() {
        let manifest = Manifest::new("ids", 12, 3);
        let text = manifest.to_text();
        assert!(text
            .starts_with("atomic-cuckoo sharded filter v1\ngeneration 12\nshards 3\nids:12:0:{"));
        assert_eq!(
            Manifest::parse(text.as_bytes(), "ids"),
            Ok(manifest.clone())
        );
        let damaged = [
            text.replace("v1", "v2"),
            text.replace("generation 12", "generation x"),
            text.replace("shards 3", "shards 4"),
            text.replace("shards 3", "shards 0"),
            text.replace("shards 3", "shards 99999"),
            format!("{text}extra\n"),
            text.trim_end().to_owned() + "\n\n",
            String::new(),
        ];
        for bad in damaged {
            assert!(Manifest::parse(bad.as_bytes(), "ids").is_err(), "{bad:?}");
        }
        assert!(Manifest::parse(b"\xff", "ids").is_err());
        // The last newline may be missing.
        assert_eq!(
            Manifest::parse(text.trim_end().as_bytes(), "ids"),
            Ok(manifest)
        );
    }

    /// A manifest whose keys are not the rule's (swapped, repeated, another name's or
    /// generation's) is refused: a reader would look items up in the wrong shards.
    #[test]
    fn manifests_naming_other_keys_are_refused() {
        let text = Manifest::new("ids", 4, 3).to_text();
        let lines: Vec<&str> = text.lines().collect();
        let with = |keys: [&str; 3]| {
            format!(
                "{}\n{}\n{}\n{}\n",
                lines[..3].join("\n"),
                keys[0],
                keys[1],
                keys[2]
            )
        };
        let other = Manifest::new("other", 4, 3);
        let older = Manifest::new("ids", 3, 3);
        for bad in [
            with([lines[4], lines[3], lines[5]]),
            with([lines[3], lines[3], lines[5]]),
            with([&other.keys[0], lines[4], lines[5]]),
            with([lines[3], lines[4], &older.keys[2]]),
        ] {
            assert!(Manifest::parse(bad.as_bytes(), "ids").is_err(), "{bad:?}");
        }
        assert!(Manifest::parse(with([lines[3], lines[4], lines[5]]).as_bytes(), "ids").is_ok());
    }

    #[test]
    fn ledgers_read_back_and_hold_only_shard_keys_of_their_filter() {
        let ledger = Ledger {
            started: 9,
            keys: vec![shard_key("ids", 8, 0, 2), shard_key("ids", 9, 1, 2)],
        };
        assert_eq!(
            Ledger::parse(ledger.to_text().as_bytes(), "ids"),
            Ok(ledger.clone())
        );
        assert_eq!(ledger_key("ids"), "{ids}:ledger");
        assert_eq!(
            reference_slot(ledger_key("ids").as_bytes()),
            reference_slot(b"ids")
        );
        for bad in [
            ledger.to_text().replace("started 9", "started x"),
            ledger.to_text().replace("v1", "v0"),
            format!("{}user:42\n", ledger.to_text()),
            format!("{}ids:1:0:{{zz}}\n", ledger.to_text()),
            format!("{}ids:1:0\n", ledger.to_text()),
            format!("{}other:1:0:{{1}}\n", ledger.to_text()),
            // A generation after the one started, leading zeros, a tag that is not the
            // smallest of its slot (any other hex number is someone's key).
            format!("{}ids:10:0:{{8209}}\n", ledger.to_text()),
            format!("{}ids:08:0:{{8209}}\n", ledger.to_text()),
            format!("{}ids:8:0:{{beef}}\n", ledger.to_text()),
        ] {
            assert!(Ledger::parse(bad.as_bytes(), "ids").is_err(), "{bad:?}");
        }
    }
}
