//! The fee policy of anchoring transactions (EIP-1559), with no I/O.
//!
//! The cap (`--max-gas-price-gwei`) bounds `max_fee_per_gas`, the most a transaction can
//! ever pay per gas, not the network's current price: a signed transaction never promises
//! more than the cap.
//!
//! ```text
//!  first attempt   max_fee = min(2·base_fee + tip, cap)        refused if base_fee > cap
//!                  tip     = min(network tip, max_fee − base_fee)
//!  replacement     both fields × 9/8 (rounded up, +12.5 %), max_fee at least 2·base_now + tip;
//!                  none when the bumped max_fee would pass the cap
//! ```
//!
//! Nodes accept a replacement at the same nonce only when both fee fields rise by at least
//! 10 % (geth's default price bump); 12.5 % per step clears it, and keeps pace with the most
//! the base fee can rise per block (also 12.5 %).
//!
//! ```
//! use afr_anchorer::fees::{bump, initial};
//! let f = initial(10, 2, 1_000).unwrap();
//! assert_eq!((f.max_fee_per_gas, f.max_priority_fee_per_gas), (22, 2));
//! let g = bump(f, 10, 1_000).unwrap();
//! assert_eq!((g.max_fee_per_gas, g.max_priority_fee_per_gas), (25, 3));
//! assert!(bump(f, 10, 24).is_none()); // +12.5 % would pass the cap
//! ```

/// The two EIP-1559 fee fields of a transaction, in wei per gas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fees {
    /// `max_fee_per_gas`.
    pub max_fee_per_gas: u128,
    /// `max_priority_fee_per_gas`.
    pub max_priority_fee_per_gas: u128,
}

/// The base fee is over the cap: no transaction under the cap can be included now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverCap {
    /// The base fee, wei per gas.
    pub price: u128,
    /// The cap.
    pub cap: u128,
}

/// `x · 9/8`, rounded up.
fn plus_eighth(x: u128) -> u128 {
    x.saturating_add(x.div_ceil(8))
}

/// Fees of a first attempt, for a block with `base_fee` and a network tip of `tip`.
pub fn initial(base_fee: u128, tip: u128, cap: u128) -> Result<Fees, OverCap> {
    if base_fee > cap {
        return Err(OverCap {
            price: base_fee,
            cap,
        });
    }
    let max_fee = base_fee.saturating_mul(2).saturating_add(tip).min(cap);
    Ok(Fees {
        max_fee_per_gas: max_fee,
        max_priority_fee_per_gas: tip.min(max_fee - base_fee),
    })
}

/// Fees of a replacement of `prev` when the base fee is now `base_now`: both fields at least
/// +12.5 %. `None` when that would pass the cap (the transaction then waits as it is).
pub fn bump(prev: Fees, base_now: u128, cap: u128) -> Option<Fees> {
    let tip = plus_eighth(prev.max_priority_fee_per_gas);
    let min_max = plus_eighth(prev.max_fee_per_gas);
    let max_fee = min_max
        .max(base_now.saturating_mul(2).saturating_add(tip))
        .min(cap);
    if max_fee < min_max || max_fee <= prev.max_fee_per_gas {
        return None;
    }
    Some(Fees {
        max_fee_per_gas: max_fee,
        max_priority_fee_per_gas: tip.min(max_fee),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_bounds_the_max_fee_not_the_price() {
        // 2·base + tip over the cap: the max fee is the cap.
        let f = initial(60, 5, 100).unwrap();
        assert_eq!((f.max_fee_per_gas, f.max_priority_fee_per_gas), (100, 5));
        // Tip clipped so base + tip fits under the max fee.
        let f = initial(98, 5, 100).unwrap();
        assert_eq!((f.max_fee_per_gas, f.max_priority_fee_per_gas), (100, 2));
        assert_eq!(
            initial(101, 1, 100),
            Err(OverCap {
                price: 101,
                cap: 100
            })
        );
    }

    #[test]
    fn every_bump_is_at_least_an_eighth_and_never_passes_the_cap() {
        let cap = 10_000;
        let mut f = initial(100, 3, cap).unwrap();
        let mut steps = 0;
        while let Some(g) = bump(f, 100, cap) {
            assert!(
                g.max_fee_per_gas * 8 >= f.max_fee_per_gas * 9,
                "{f:?} -> {g:?}"
            );
            assert!(
                g.max_priority_fee_per_gas * 8 >= f.max_priority_fee_per_gas * 9,
                "{f:?} -> {g:?}"
            );
            assert!(g.max_fee_per_gas <= cap);
            f = g;
            steps += 1;
        }
        assert!(
            steps > 5 && f.max_fee_per_gas * 9 > cap * 8,
            "{steps} {f:?}"
        );
    }

    #[test]
    fn a_bump_follows_a_base_fee_spike() {
        let f = initial(10, 1, 1_000).unwrap();
        let g = bump(f, 300, 1_000).unwrap();
        assert_eq!(g.max_fee_per_gas, 602);
        // Over the cap: as high as the cap allows, if that is still a full step.
        let g = bump(f, 600, 1_000).unwrap();
        assert_eq!(g.max_fee_per_gas, 1_000);
    }
}
