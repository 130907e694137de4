#!/usr/bin/env bash
# Runs the loom suite against each deliberately broken variant of the crate and exits non-zero
# if any variant survives. A variant counts as caught only when a model's own assertion fails
# (a panic located in loom-tests/tests/): a build error, a loom-internal panic or a model that
# explored too little is not a catch.
set -uo pipefail
cd "$(dirname "$0")/.."

# The three the design names; two that only the neighbour models (writers on pairs that share a
# bucket) can catch; two that the save models catch (a writer that ignores a save's freeze, and
# a save that freezes by holding every stripe's lock bit, which leaves readers unproven); four in
# the RedisBloom filter (a kick walk that writes holding only the new fingerprint's pair, a
# compaction that erases from the newer sub-filter before it copies into the older one, a slot
# write that loads and stores a word that other stripes' buckets share, a lookup that takes the
# misses of its one pass over the sub-filters as proven); three for packed buckets (model 15: a
# stripe per bucket, so that one word holds buckets of several stripes; a move's
# erase of a straddling lane that stores only its last word with Release; a compact table's miss
# validated against its first bucket's stripe alone); six for the growable filter's doubling
# table (models 17-19: a lookup that trusts a read of an unsplit bucket without validating its
# stripe, a split that clears its bucket's bit after letting the stripes go, a last split that
# clears the "splitting" flag before it takes its stripes, a lookup and a writer that do not
# check the doubling count again, a move of a cuckoo path made without its stripes); five for
# inserts that claim a lane without stripes (two claims of one lane that both win, a locked
# write that loads and stores a word beside a claim, a claim that ignores a save's freeze, a
# claim of a lane across two words written without its bucket's stripe, or under it with its
# version unchanged); one for removes (model 20e: a remove that holds its pair's stripes as a
# reader does, with no release fence and its versions unchanged, as if it took none, so that a
# twin key's insert and remove hide an item from a lookup; model 9b catches it too, since such
# a hold skips a save's freeze).
# Arguments, if any, name the mutants to run instead of all of them.
mutants=(no_version_check no_release_fence erase_before_copy fence_between_locks move_locks_one_stripe
    writer_ignores_freeze freeze_through_version
    rb_no_path_locks rb_erase_before_copy rb_plain_store rb_unvalidated_miss
    words_shared_by_stripes erase_release_last_word_only compact_one_stripe_miss
    doubling_unvalidated_old doubling_bit_after_unlock doubling_reader_ignores_doublings
    doubling_writer_ignores_doublings doubling_move_unlocked doubling_flag_before_split
    claim_plain_store locked_put_plain_store claim_ignores_freeze straddle_claim_unlocked
    straddle_claim_unchanged_version remove_unchanged_version)
if [ "$#" -gt 0 ]; then
    mutants=("$@")
fi
preemptions="${LOOM_MAX_PREEMPTIONS:-2}"
survivors=()
# One target directory for every mutant, emptied after each: a mutant's flags rebuild the whole
# tree anyway (cargo keeps each set of flags' artifacts apart), and kept, seventeen builds took
# six gigabytes. Logs stay beside it.
target="target/loom-mutant"
logs="target/loom-mutant-logs"
mkdir -p "$logs"

for mutant in "${mutants[@]}"; do
    flags="--cfg loom --cfg loom_mutant=\"$mutant\""
    log="$logs/$mutant.log"
    echo "=== mutant $mutant"
    if ! RUSTFLAGS="$flags" CARGO_TARGET_DIR="$target" \
        cargo test -p loom-tests --features models --release --no-run; then
        echo "mutant $mutant does not build: that proves nothing" >&2
        exit 2
    fi
    RUSTFLAGS="$flags" CARGO_TARGET_DIR="$target" LOOM_MAX_PREEMPTIONS="$preemptions" \
        cargo test -p loom-tests --features models --release --no-fail-fast -- --nocapture >"$log" 2>&1
    status=$?
    caught_by=$(grep -E "^thread '.*' \([0-9]+\) panicked at loom-tests/tests/" "$log" |
        sed -E "s/^thread '([^']*)'.*/\1/" | sort -u)
    if [ "$status" -ne 0 ] && [ -n "$caught_by" ]; then
        echo "caught by:"
        printf '  %s\n' $caught_by
    else
        echo "SURVIVED (exit status $status); log: $log"
        survivors+=("$mutant")
    fi
    rm -rf "$target"
done

if [ "${#survivors[@]}" -gt 0 ]; then
    echo "mutants that survived the loom suite: ${survivors[*]}" >&2
    exit 1
fi
echo "all ${#mutants[@]} mutants caught"
