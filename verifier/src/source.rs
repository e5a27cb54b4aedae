//! Where anchored roots come from, and the chain they must come from.
//!
//! A [`Source`] is what the user asked for (`--rpc`, `--anchors`, or neither). Reading
//! anchors from it needs the chain the user trusts: a [`PinnedSource`] is a source together
//! with that chain id, and [`PinnedSource::new`] is the only way to make one, so the rule
//! "a source of anchors needs a pinned chain" is checked there and nowhere else. Whatever
//! reads an endpoint or an anchors file takes a `PinnedSource` and has the chain id at hand.
//!
//! ```text
//!  Source::Rpc | Source::File ──PinnedSource::of(chain_id: Some)──► Some(PinnedSource)
//!                             ──PinnedSource::of(chain_id: None)──► UsageError::ChainNotPinned
//!  Source::None               ──PinnedSource::of(_)───────────────► None (nothing to read)
//! ```

use std::path::Path;

use crate::error::UsageError;

/// Where the anchored roots come from, as asked for.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// JSON-RPC endpoints, read at `block` (latest if `None`), logs from `from_block`; as many
    /// of them as `agree` says must give the same answer.
    Rpc {
        /// The endpoints (at least one).
        urls: &'a [String],
        /// How many must agree.
        agree: crate::providers::Agree,
        /// Block to read at.
        block: Option<u64>,
        /// First block searched for `Anchored` logs.
        from_block: u64,
    },
    /// An anchors file written by `afr-verify anchors`: a proof archive, re-checked offline.
    File(&'a Path),
    /// None: the answer is at best incomplete.
    None,
}

/// Where pinned anchored roots are read: a [`Source`] that names one.
#[derive(Debug, Clone, Copy)]
pub enum Origin<'a> {
    /// JSON-RPC endpoints, read at `block` (latest if `None`), logs from `from_block`; as many
    /// of them as `agree` says must give the same answer.
    Rpc {
        /// The endpoints (at least one).
        urls: &'a [String],
        /// How many must agree.
        agree: crate::providers::Agree,
        /// Block to read at.
        block: Option<u64>,
        /// First block searched for `Anchored` logs.
        from_block: u64,
    },
    /// An anchors file written by `afr-verify anchors`.
    File(&'a Path),
}

impl Origin<'_> {
    /// The command-line flag that names this kind of source.
    fn flag(&self) -> &'static str {
        match self {
            Origin::Rpc { .. } => "--rpc",
            Origin::File(_) => "--anchors",
        }
    }
}

/// A source of anchored roots and the chain id they must come from. It cannot be built
/// without a chain id.
#[derive(Debug, Clone, Copy)]
pub struct PinnedSource<'a> {
    chain_id: u64,
    origin: Origin<'a>,
}

impl<'a> PinnedSource<'a> {
    /// `origin` pinned to `chain_id`: [`UsageError::ChainNotPinned`] without one (the flag
    /// named is `origin`'s). The one place that rule is checked.
    pub fn new(origin: Origin<'a>, chain_id: Option<u64>) -> Result<PinnedSource<'a>, UsageError> {
        match chain_id {
            Some(chain_id) => Ok(PinnedSource { chain_id, origin }),
            None => Err(UsageError::ChainNotPinned {
                flag: origin.flag(),
            }),
        }
    }

    /// `src` pinned to `chain_id` as [`PinnedSource::new`] does; `None` for [`Source::None`],
    /// which reads nothing and needs no chain.
    pub fn of(
        src: Source<'a>,
        chain_id: Option<u64>,
    ) -> Result<Option<PinnedSource<'a>>, UsageError> {
        let origin = match src {
            Source::Rpc {
                urls,
                agree,
                block,
                from_block,
            } => Origin::Rpc {
                urls,
                agree,
                block,
                from_block,
            },
            Source::File(path) => Origin::File(path),
            Source::None => return Ok(None),
        };
        PinnedSource::new(origin, chain_id).map(Some)
    }

    /// The pinned chain id.
    pub fn chain_id(&self) -> u64 {
        self.chain_id
    }

    /// Where the roots are read.
    pub fn origin(&self) -> Origin<'a> {
        self.origin
    }

    /// The same source, an endpoint read at `block` (a case reads every bundle at one block);
    /// an anchors file as it is.
    pub(crate) fn at_block(self, at: u64) -> PinnedSource<'a> {
        let origin = match self.origin {
            Origin::Rpc {
                urls,
                agree,
                from_block,
                ..
            } => Origin::Rpc {
                urls,
                agree,
                block: Some(at),
                from_block,
            },
            file @ Origin::File(_) => file,
        };
        PinnedSource { origin, ..self }
    }
}
