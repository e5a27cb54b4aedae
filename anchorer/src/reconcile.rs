//! What one anchoring pass must do, decided from the store and from what the chain answered
//! at one block, with no I/O.
//!
//! The driver ([`crate::anchor_pass`]) reads, at one pinned block `B` (EIP-1898 block-hash
//! reads), the contract's `head(recorder)` and `rootOf(recorder, e)` for the epochs after the
//! verification marker, and looks up by hash the receipts of the local transactions not yet
//! confirmed. [`plan`] turns that into one [`Step`] per epoch:
//!
//! ```text
//!  root on chain at B     local receipt             step
//!  ─────────────────────  ────────────────────────  ─────────────────────────────────────────
//!  == local root          yes                       Anchored (state from the receipt's block;
//!                                                   block corrected if the tx moved)
//!  == local root          none                      Recover (from the Anchored event)
//!  zero                   tx in a block, its log     NotVisibleYet (a lagging or load-balanced
//!                         anchors this epoch+root   provider; never a deletion, never a fork)
//!  zero                   tx gone / reverted /      Post (re-sent; the old receipt is marked
//!                         no log for this epoch     pending, not deleted)
//!  zero                   none                      Post
//!  other, non-zero        none, or tx at ≤ B        FORK (halt)
//!  other, non-zero        tx in a block after B     NotVisibleYet (B is older than our tx)
//! ```
//!
//! Posts are contiguous: nothing after an epoch that is not visible yet is posted (the
//! contract would refuse it as not the next epoch). The verification marker advances over the
//! longest run of epochs, right after the old marker, that are `Anchored` with a state that
//! covers (confirmed or finalized); a pass with nothing new reads only `head`.
//!
//! ```
//! use afr_anchorer::reconcile::{plan, BlockRef, ChainView, Local, Step};
//! use afr_core::Hash32;
//! let chain = ChainView {
//!     at: BlockRef { number: 10, hash: [1; 32] },
//!     confirmed_upto: 10,
//!     finalized_upto: None,
//!     head: None,
//!     roots: Default::default(),
//!     inclusions: Default::default(),
//! };
//! let local = [Local { epoch: 0, root: Hash32([7; 32]), receipt: None }];
//! let p = plan(&local, &chain, Some(0)).unwrap();
//! assert_eq!(p.steps, [Step::Post { epoch: 0, reorged: false }]);
//! ```

use std::collections::BTreeMap;

use afr_core::Hash32;

use crate::ReceiptState;

/// A block every read of a pass is pinned to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRef {
    /// Number.
    pub number: u64,
    /// Hash.
    pub hash: [u8; 32],
}

/// What the store says about one epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Local {
    /// The epoch.
    pub epoch: u64,
    /// Its root.
    pub root: Hash32,
    /// Its receipt on this chain and contract, if any.
    pub receipt: Option<LocalReceipt>,
}

/// The part of a stored receipt the plan looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalReceipt {
    /// Transaction hash.
    pub tx: [u8; 32],
    /// Block it was stored with (0 while pending).
    pub block: u64,
    /// That block's hash.
    pub block_hash: [u8; 32],
    /// Stored state.
    pub state: ReceiptState,
}

/// A transaction receipt looked up by hash (`eth_getTransactionReceipt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inclusion {
    /// The node knows no receipt: the transaction is not in any block it has.
    Missing,
    /// Mined.
    Included {
        /// Block number.
        block: u64,
        /// Block hash.
        block_hash: [u8; 32],
        /// Status 1.
        success: bool,
        /// `(epoch, root)` of every `Anchored` event of this recorder from the contract in
        /// the receipt's logs.
        anchored: Vec<(u64, Hash32)>,
    },
}

/// What the chain answered, every contract read at [`ChainView::at`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainView {
    /// The pinned block.
    pub at: BlockRef,
    /// Inclusions in blocks up to this number count as confirmed under the policy.
    pub confirmed_upto: u64,
    /// The chain's `finalized` block number, when it was read.
    pub finalized_upto: Option<u64>,
    /// `head(recorder)`.
    pub head: Option<u64>,
    /// `rootOf(recorder, e)` for the epochs asked (those up to `head` after the marker).
    pub roots: BTreeMap<u64, Hash32>,
    /// Receipts looked up by transaction hash.
    pub inclusions: BTreeMap<[u8; 32], Inclusion>,
}

impl ChainView {
    /// The state of an inclusion in block `block`.
    pub fn state_of(&self, block: u64) -> ReceiptState {
        if self.finalized_upto.is_some_and(|f| block <= f) {
            ReceiptState::Finalized
        } else if block <= self.confirmed_upto {
            ReceiptState::Confirmed
        } else {
            ReceiptState::Included
        }
    }
}

/// Why an epoch with a local receipt is not visible yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Its transaction is in a block after the pinned one (the reads lag the receipt).
    TxAfterPinnedBlock {
        /// The transaction's block.
        block: u64,
    },
    /// Its transaction is in a block at or before the pinned one, yet the pinned read shows
    /// no root: the provider's answers disagree; wait rather than act.
    ProviderDisagrees {
        /// The transaction's block.
        block: u64,
    },
    /// The pinned read shows another root, but at a block older than the local transaction.
    OtherRootAtOlderBlock {
        /// The transaction's block.
        block: u64,
    },
    /// An earlier epoch is not visible yet, so this one cannot be posted.
    Earlier {
        /// That epoch.
        epoch: u64,
    },
}

/// The decision for one epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Anchored with the local root; its receipt stands. `state` is what it has reached;
    /// `moved` is set when the transaction is now in another block than the stored one (a
    /// reorg re-included it): the stored block must be corrected.
    Anchored {
        /// The epoch.
        epoch: u64,
        /// Its receipt's state now.
        state: ReceiptState,
        /// The block the transaction is in now, if not the stored one.
        moved: Option<BlockRef>,
    },
    /// Anchored with the local root but no local receipt (a crash after sending): recover
    /// the receipt from the contract's `Anchored` event.
    Recover {
        /// The epoch.
        epoch: u64,
    },
    /// A local receipt exists but the chain does not show the root at the pinned block yet.
    NotVisibleYet {
        /// The epoch.
        epoch: u64,
        /// Why.
        wait: Wait,
    },
    /// Not anchored: send it. `reorged` when a local receipt existed whose transaction is no
    /// longer in the chain (or reverted, or anchors something else).
    Post {
        /// The epoch.
        epoch: u64,
        /// Whether a stored receipt's transaction was lost.
        reorged: bool,
    },
}

/// Why the pass must stop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Halt {
    /// A different, non-zero root at a block at least as new as the local transaction.
    Fork {
        /// The epoch.
        epoch: u64,
        /// Root on chain.
        onchain: Hash32,
        /// Local root.
        local: Hash32,
    },
    /// The chain holds epochs the local log does not.
    ChainAhead {
        /// Chain head.
        chain_head: u64,
        /// Local last sealed epoch.
        local_head: Option<u64>,
    },
}

/// The plan of one pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// One step per local epoch given, in order.
    pub steps: Vec<Step>,
    /// The new verification marker: last epoch of the run, right after the old marker, of
    /// epochs anchored with a covering state. `None` when the run is empty.
    pub verified_upto: Option<u64>,
}

impl Plan {
    /// The epochs to post, in order (contiguous).
    pub fn posts(&self) -> impl Iterator<Item = u64> + '_ {
        self.steps.iter().filter_map(|s| match s {
            Step::Post { epoch, .. } => Some(*epoch),
            _ => None,
        })
    }
}

/// Decides the pass. `local` holds the epochs after the marker, consecutive and in order;
/// `local_head` is the last sealed epoch of the whole log.
pub fn plan(local: &[Local], chain: &ChainView, local_head: Option<u64>) -> Result<Plan, Halt> {
    if let Some(ch) = chain.head
        && local_head.is_none_or(|l| ch > l)
    {
        return Err(Halt::ChainAhead {
            chain_head: ch,
            local_head,
        });
    }
    let mut steps = Vec::with_capacity(local.len());
    let mut blocked: Option<u64> = None;
    for l in local {
        let onchain = match chain.head {
            Some(h) if l.epoch <= h => chain.roots.get(&l.epoch).copied().unwrap_or(Hash32::ZERO),
            _ => Hash32::ZERO,
        };
        let inclusion = l.receipt.map(|r| {
            (
                r,
                chain
                    .inclusions
                    .get(&r.tx)
                    .cloned()
                    // Not looked up: the stored receipt is trusted as it is (confirmed earlier).
                    .unwrap_or(Inclusion::Included {
                        block: r.block,
                        block_hash: r.block_hash,
                        success: true,
                        anchored: vec![(l.epoch, l.root)],
                    }),
            )
        });
        let step = if onchain == l.root {
            match inclusion {
                None => Step::Recover { epoch: l.epoch },
                Some((
                    r,
                    Inclusion::Included {
                        block,
                        block_hash,
                        success: true,
                        anchored,
                    },
                )) if anchored.contains(&(l.epoch, l.root)) => {
                    let moved =
                        (block != r.block || block_hash != r.block_hash).then_some(BlockRef {
                            number: block,
                            hash: block_hash,
                        });
                    Step::Anchored {
                        epoch: l.epoch,
                        state: chain.state_of(block),
                        moved,
                    }
                }
                // Anchored, but our transaction is not what did it (a crash lost the receipt
                // of a replacement, or another run's transaction landed): recover it.
                Some(_) => Step::Recover { epoch: l.epoch },
            }
        } else if onchain == Hash32::ZERO {
            match inclusion {
                Some((
                    _,
                    Inclusion::Included {
                        block,
                        success: true,
                        anchored,
                        ..
                    },
                )) if anchored.contains(&(l.epoch, l.root)) => Step::NotVisibleYet {
                    epoch: l.epoch,
                    wait: if block > chain.at.number {
                        Wait::TxAfterPinnedBlock { block }
                    } else {
                        Wait::ProviderDisagrees { block }
                    },
                },
                Some(_) => Step::Post {
                    epoch: l.epoch,
                    reorged: true,
                },
                None => Step::Post {
                    epoch: l.epoch,
                    reorged: false,
                },
            }
        } else {
            match inclusion {
                Some((
                    _,
                    Inclusion::Included {
                        block,
                        success: true,
                        ..
                    },
                )) if block > chain.at.number => Step::NotVisibleYet {
                    epoch: l.epoch,
                    wait: Wait::OtherRootAtOlderBlock { block },
                },
                _ => {
                    return Err(Halt::Fork {
                        epoch: l.epoch,
                        onchain,
                        local: l.root,
                    });
                }
            }
        };
        let step = match (step, blocked) {
            (Step::Post { .. }, Some(e)) => Step::NotVisibleYet {
                epoch: l.epoch,
                wait: Wait::Earlier { epoch: e },
            },
            (s @ Step::NotVisibleYet { .. }, None) => {
                blocked = Some(l.epoch);
                s
            }
            (s, _) => s,
        };
        steps.push(step);
    }
    let mut verified_upto = None;
    for s in &steps {
        match s {
            Step::Anchored { epoch, state, .. } if state.covers() => verified_upto = Some(*epoch),
            _ => break,
        }
    }
    Ok(Plan {
        steps,
        verified_upto,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: [Hash32; 4] = [
        Hash32([1; 32]),
        Hash32([2; 32]),
        Hash32([3; 32]),
        Hash32([4; 32]),
    ];

    fn tx(e: u64) -> [u8; 32] {
        [0x10 + e as u8; 32]
    }

    fn bh(n: u64) -> [u8; 32] {
        [n as u8; 32]
    }

    fn receipt(e: u64, block: u64, state: ReceiptState) -> LocalReceipt {
        LocalReceipt {
            tx: tx(e),
            block,
            block_hash: bh(block),
            state,
        }
    }

    fn local(n: u64, receipts: &[(u64, u64, ReceiptState)]) -> Vec<Local> {
        (0..n)
            .map(|e| Local {
                epoch: e,
                root: R[e as usize],
                receipt: receipts
                    .iter()
                    .find(|r| r.0 == e)
                    .map(|&(e, b, s)| receipt(e, b, s)),
            })
            .collect()
    }

    /// A chain at block `at` (confirmations 1) whose contract holds `roots` for epochs 0...
    fn chain(at: u64, roots: &[Hash32]) -> ChainView {
        ChainView {
            at: BlockRef {
                number: at,
                hash: bh(at),
            },
            confirmed_upto: at,
            finalized_upto: None,
            head: (!roots.is_empty()).then(|| roots.len() as u64 - 1),
            roots: roots
                .iter()
                .enumerate()
                .map(|(e, r)| (e as u64, *r))
                .collect(),
            inclusions: BTreeMap::new(),
        }
    }

    fn included(c: &mut ChainView, e: u64, block: u64, anchored: &[(u64, Hash32)]) {
        c.inclusions.insert(
            tx(e),
            Inclusion::Included {
                block,
                block_hash: bh(block),
                success: true,
                anchored: anchored.to_vec(),
            },
        );
    }

    use ReceiptState::*;

    #[test]
    fn nothing_anchored_posts_everything() {
        let p = plan(&local(3, &[]), &chain(5, &[]), Some(2)).unwrap();
        assert_eq!(p.posts().collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(p.verified_upto, None);
    }

    #[test]
    fn anchored_and_confirmed_advance_the_marker_and_unconfirmed_stop_it() {
        let l = local(3, &[(0, 3, Confirmed), (1, 4, Included), (2, 9, Included)]);
        let mut c = chain(9, &R[..3]);
        c.confirmed_upto = 8; // two confirmations
        included(&mut c, 1, 4, &[(1, R[1])]);
        included(&mut c, 2, 9, &[(2, R[2])]);
        let p = plan(&l, &c, Some(2)).unwrap();
        assert_eq!(
            p.steps,
            [
                Step::Anchored {
                    epoch: 0,
                    state: Confirmed,
                    moved: None
                },
                Step::Anchored {
                    epoch: 1,
                    state: Confirmed,
                    moved: None
                },
                Step::Anchored {
                    epoch: 2,
                    state: Included,
                    moved: None
                },
            ]
        );
        assert_eq!(p.verified_upto, Some(1));
        c.finalized_upto = Some(3);
        let p = plan(&l, &c, Some(2)).unwrap();
        assert!(matches!(
            p.steps[0],
            Step::Anchored {
                state: Finalized,
                ..
            }
        ));
    }

    #[test]
    fn a_lost_receipt_is_recovered() {
        let p = plan(&local(2, &[(0, 3, Confirmed)]), &chain(9, &R[..2]), Some(1)).unwrap();
        assert_eq!(p.steps[1], Step::Recover { epoch: 1 });
        assert_eq!(p.verified_upto, Some(0));
    }

    /// The stale read of a lagging provider: the pinned block is older than our transaction.
    #[test]
    fn a_zero_root_with_a_receipt_is_not_visible_yet_never_a_reorg() {
        let l = local(3, &[(0, 3, Confirmed), (1, 10, Included)]);
        let mut c = chain(9, &R[..1]);
        included(&mut c, 1, 10, &[(1, R[1])]);
        let p = plan(&l, &c, Some(2)).unwrap();
        assert_eq!(
            p.steps[1],
            Step::NotVisibleYet {
                epoch: 1,
                wait: Wait::TxAfterPinnedBlock { block: 10 }
            }
        );
        // Epoch 2 must wait for epoch 1: posting it now would revert.
        assert_eq!(
            p.steps[2],
            Step::NotVisibleYet {
                epoch: 2,
                wait: Wait::Earlier { epoch: 1 }
            }
        );
        assert_eq!(p.posts().count(), 0);
        // Answers that disagree (tx mined at or before the pinned block, no root): wait too.
        included(&mut c, 1, 8, &[(1, R[1])]);
        assert_eq!(
            plan(&l, &c, Some(2)).unwrap().steps[1],
            Step::NotVisibleYet {
                epoch: 1,
                wait: Wait::ProviderDisagrees { block: 8 }
            }
        );
    }

    #[test]
    fn a_receipt_whose_transaction_is_gone_is_reposted() {
        let l = local(2, &[(0, 3, Confirmed), (1, 8, Included)]);
        let mut c = chain(9, &R[..1]);
        c.inclusions.insert(tx(1), Inclusion::Missing);
        let p = plan(&l, &c, Some(1)).unwrap();
        assert_eq!(
            p.steps[1],
            Step::Post {
                epoch: 1,
                reorged: true
            }
        );
        // Reverted, or a receipt that anchors something else: also re-posted.
        for (success, anchored) in [(false, vec![(1, R[1])]), (true, vec![(0, R[0])])] {
            c.inclusions.insert(
                tx(1),
                Inclusion::Included {
                    block: 8,
                    block_hash: bh(8),
                    success,
                    anchored,
                },
            );
            assert_eq!(
                plan(&l, &c, Some(1)).unwrap().posts().collect::<Vec<_>>(),
                [1]
            );
        }
    }

    #[test]
    fn a_transaction_re_included_in_another_block_corrects_the_stored_block() {
        let l = local(1, &[(0, 5, Included)]);
        let mut c = chain(9, &R[..1]);
        included(&mut c, 0, 7, &[(0, R[0])]);
        assert_eq!(
            plan(&l, &c, Some(0)).unwrap().steps[0],
            Step::Anchored {
                epoch: 0,
                state: Confirmed,
                moved: Some(BlockRef {
                    number: 7,
                    hash: bh(7)
                })
            }
        );
    }

    #[test]
    fn a_different_root_is_a_fork_only_at_a_block_as_new_as_the_receipt() {
        let other = Hash32([9; 32]);
        // No receipt: a fork.
        let c = chain(9, &[R[0], other]);
        assert_eq!(
            plan(&local(2, &[]), &c, Some(1)),
            Err(Halt::Fork {
                epoch: 1,
                onchain: other,
                local: R[1]
            })
        );
        // Our transaction at block 8 ≤ 9: a fork.
        let l = local(2, &[(1, 8, Included)]);
        let mut c = chain(9, &[R[0], other]);
        included(&mut c, 1, 8, &[(1, R[1])]);
        assert!(matches!(
            plan(&l, &c, Some(1)),
            Err(Halt::Fork { epoch: 1, .. })
        ));
        // Our transaction at block 10 > 9: the read is older than it; wait.
        included(&mut c, 1, 10, &[(1, R[1])]);
        assert_eq!(
            plan(&l, &c, Some(1)).unwrap().steps[1],
            Step::NotVisibleYet {
                epoch: 1,
                wait: Wait::OtherRootAtOlderBlock { block: 10 }
            }
        );
    }

    #[test]
    fn a_chain_ahead_of_the_log_halts() {
        assert_eq!(
            plan(&local(1, &[]), &chain(9, &R[..2]), Some(0)),
            Err(Halt::ChainAhead {
                chain_head: 1,
                local_head: Some(0)
            })
        );
        assert_eq!(
            plan(&[], &chain(9, &R[..1]), None),
            Err(Halt::ChainAhead {
                chain_head: 0,
                local_head: None
            })
        );
    }

    /// After the marker only newer epochs are given; the plan never looks behind them.
    #[test]
    fn epochs_after_the_marker_only() {
        let l = vec![Local {
            epoch: 3,
            root: R[3],
            receipt: None,
        }];
        let mut c = chain(9, &R[..3]);
        c.roots.clear(); // roots of 0..=2 not read: behind the marker
        let p = plan(&l, &c, Some(3)).unwrap();
        assert_eq!(p.posts().collect::<Vec<_>>(), [3]);
    }
}
