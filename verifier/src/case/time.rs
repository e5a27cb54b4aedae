//! The time rules of a link (`docs/spec/delegation.md` §4): what the anchoring of each epoch
//! says about when its events can have happened.
//!
//! A root anchored in block B at time T existed by T: an event of that epoch dated more than
//! [`SKEW_US`] after T is impossible, whoever's clock wrote it. Only the chain (`--rpc`) or the
//! arbiter's own anchors file dates one party's epoch to convict another party; a party's own
//! file dates only its own events.
//!
//! ```text
//!  cited event  > T(its own epoch) + skew                       impossible: the cited party's
//!  citing event > T(its own epoch) + skew                       impossible: the citing party's
//!  cited event  > T(the citing event's epoch) + skew            impossible: the cited party's
//!                 (T from the chain or the arbiter's file only)  (it is cited before it exists)
//!  citing event + skew < cited event                            the clocks disagree: the case's
//! ```

use std::collections::BTreeMap;

use afr_core::RecorderId;

use super::{Blame, Known};

/// Clock skew allowed between two recorders, and between a recorder and the chain, in µs.
pub const SKEW_US: u64 = 60_000_000;

/// Where a block time came from: only the chain, or a file the arbiter gave, can date one
/// party's epoch to convict another party.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TimeSrc {
    /// Read from the chain (`--rpc`).
    Chain,
    /// An anchors file given on the command line (`--anchors`): the arbiter's own.
    Arbiter,
    /// An anchors file a party's case-file entry lists: that party's word.
    Party(usize),
}

/// When an anchored epoch was anchored: its block, the block's time if known, and where the
/// time came from.
pub(super) type AnchoredAt = BTreeMap<(RecorderId, u64), (u64, Option<u64>, TimeSrc)>;

/// What the time rules find about a link whose both ends are disclosed under anchored roots.
pub(super) enum TimeFinding {
    /// An event is dated when it cannot have happened: tampering by the party blamed.
    Impossible(Blame, String),
    /// The citing event is dated before what it cites, and neither date is impossible: the two
    /// recorders' clocks disagree, and nothing shows which one is wrong.
    Disagree(String),
}

/// The time rules, in the order of the module table: first each event against its own epoch's
/// anchoring (a claim that is impossible on its own), then the cited event against the
/// anchoring of the citing one (whose record already holds its leaf), dated from the chain or
/// the arbiter's file only; a citing event dated before what it cites, with neither
/// impossible, is a clock disagreement. `cited` and `citing` are each the event's name in
/// messages, the event and its recorder; `None`: the times agree.
pub(super) fn judge_times(
    anchored_at: &AnchoredAt,
    (to, target, rec): (&str, &Known, &RecorderId),
    (from, own, citing): (&str, &Known, &RecorderId),
) -> Option<TimeFinding> {
    let dated_after = |who: &str, k: &Known, rec: &RecorderId| -> Option<String> {
        let &(block, Some(time), _) = anchored_at.get(&(*rec, k.epoch))? else {
            return None;
        };
        (k.timestamp_us > time.saturating_mul(1_000_000).saturating_add(SKEW_US)).then(|| {
            format!(
                "{who} is dated {}, more than 60 s after block {block} (time {time} s) anchored its own epoch {}",
                secs(k.timestamp_us),
                k.epoch
            )
        })
    };
    if let Some(why) = dated_after(to, target, rec) {
        return Some(TimeFinding::Impossible(Blame::Linked, why));
    }
    if let Some(why) = dated_after(from, own, citing) {
        return Some(TimeFinding::Impossible(Blame::Citing, why));
    }
    if let Some(&(block, Some(time), src)) = anchored_at.get(&(*citing, own.epoch))
        && matches!(src, TimeSrc::Chain | TimeSrc::Arbiter)
    {
        let limit = time.saturating_mul(1_000_000).saturating_add(SKEW_US);
        if target.timestamp_us > limit {
            return Some(TimeFinding::Impossible(
                Blame::Linked,
                format!(
                    "{to} is dated {}, more than 60 s after block {block} (time {time} s) anchored the epoch of {from}, which already cites it",
                    secs(target.timestamp_us)
                ),
            ));
        }
    }
    if own.timestamp_us.saturating_add(SKEW_US) < target.timestamp_us {
        return Some(TimeFinding::Disagree(format!(
            "{from} is dated {}, more than 60 s before {to} it cites ({}): the two recorders' clocks disagree, and no anchoring time shows which one is wrong",
            secs(own.timestamp_us),
            secs(target.timestamp_us)
        )));
    }
    None
}

/// `1712345678.123456 s` from µs.
fn secs(us: u64) -> String {
    format!("{}.{:06} s", us / 1_000_000, us % 1_000_000)
}
