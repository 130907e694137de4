//! The public surface of `atomic_cuckoo::redisbloom` so far: its error types.

use std::error::Error;

use atomic_cuckoo::redisbloom::{LoadError, LzfError, ReserveError};

fn assert_error_type<E: Error + Clone + PartialEq + Send + Sync + 'static>() {}

#[test]
fn errors_are_well_behaved_error_types() {
    assert_error_type::<LoadError>();
    assert_error_type::<LzfError>();
    assert_error_type::<ReserveError>();
}

#[test]
fn a_corrupt_lzf_string_names_its_cause() {
    let cause = LzfError::Truncated { at: 7 };
    let error = LoadError::Lzf {
        offset: 40,
        error: cause,
    };
    let source = error.source().expect("the LZF error is the source");
    assert_eq!(source.to_string(), cause.to_string());
    assert!(error.to_string().contains("40"));
    assert!(LoadError::NoChunks.source().is_none());
}

/// Redis 8's replies for out-of-range CF.RESERVE arguments.
#[test]
fn reserve_errors_read_like_redis_8() {
    let cases = [
        (
            ReserveError::CapacityTooSmall {
                capacity: 3,
                min: 4,
            },
            "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]",
        ),
        (
            ReserveError::CapacityTooLarge { capacity: 1 << 31 },
            "Capacity must be in the range [2 * BUCKETSIZE, 1073741824]",
        ),
        (
            ReserveError::MaxIterations { max_iterations: 0 },
            "MAXITERATIONS: value must be in the range [1, 65535]",
        ),
        (
            ReserveError::Expansion { expansion: 40000 },
            "EXPANSION: value must be in the range [0, 32768]",
        ),
    ];
    for (error, text) in cases {
        assert_eq!(error.to_string(), text);
    }
}

/// Each of the errors that mirror a Redis reply starts with that reply's text.
#[test]
fn load_errors_that_redis_also_reports_start_with_its_text() {
    assert!(LoadError::HeaderLength { len: 39 }
        .to_string()
        .starts_with("Invalid header"));
    for error in [
        LoadError::EmptyChunk { iterator: 5 },
        LoadError::ChunkBeforeStart {
            iterator: 2,
            len: 4,
        },
        LoadError::ChunkStraddles {
            iterator: 9,
            len: 4,
        },
    ] {
        assert!(
            error.to_string().starts_with("Couldn't load chunk!"),
            "{error}"
        );
    }
}

/// The `redis` re-exported by the crate is the one its bridge takes connections of: a program
/// whose own `redis` is another version makes its connections with this one.
#[cfg(feature = "redis")]
#[test]
fn the_reexported_redis_is_the_one_the_bridge_takes() {
    use atomic_cuckoo::redis;
    use atomic_cuckoo::redisbloom::{BridgeError, ExportMode, ExportSummary, RedisCuckooFilter};

    // Compiles only if `redis::Connection` here is the bridge's `ConnectionLike`.
    let export: fn(
        &RedisCuckooFilter,
        &mut redis::Connection,
    ) -> Result<ExportSummary, BridgeError> =
        |filter, conn| filter.export_to(conn, "key", ExportMode::Restore { replace: false });
    let _ = export;
    // Nothing listens on port 1: the client of the re-exported crate says so with its own error.
    let refused = match redis::Client::open("redis://127.0.0.1:1/")
        .expect("a valid URL")
        .get_connection()
    {
        Ok(_) => panic!("nothing listens on port 1"),
        Err(e) => e,
    };
    assert!(refused.is_connection_refusal(), "{refused}");
}
