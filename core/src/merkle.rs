//! RFC 6962 Merkle trees: roots, inclusion and consistency proofs.
//!
//! The tree over `n` leaves splits at the largest power of two `k < n`:
//! `MTH(D[0:n]) = SHA-256(0x01 ‖ MTH(D[0:k]) ‖ MTH(D[k:n]))`. It is left-balanced, so it can
//! be built one leaf at a time from a stack of perfect subtrees ([`CompactRange`]); sealing an
//! epoch then costs `O(log n)` hashes instead of a whole-tree rebuild.
//!
//! ```text
//!            root (n = 5)
//!           /          \
//!      h(0..4)          l4        leaf 4 is promoted: no sibling at levels 0 and 1
//!      /     \
//!   h(0,1)  h(2,3)
//! ```
//!
//! Building and proving use `rs_merkle` (its "promote the odd node" tree is the RFC 6962 tree).
//! Verifying does not: `rs_merkle`'s verifier takes the tree size as a separate trusted input
//! and does not check the proof length against it, and it has no consistency proofs. The
//! verifiers here follow RFC 9162 §2.1.3.2 and §2.1.4.2: sizes are checked first, the proof must
//! have exactly the length the `(index, size)` pair requires, and a mismatch is a typed error,
//! never a panic.
//!
//! ```
//! use afr_core::{hash::leaf_hash, merkle};
//! let leaves: Vec<_> = (0u8..5).map(|i| leaf_hash(&[i])).collect();
//! let root = merkle::root(&leaves);
//! let proof = merkle::inclusion_proof(&leaves, 4).unwrap();
//! assert_eq!(proof.len(), 1);
//! merkle::verify_inclusion(&leaves[4], 4, 5, &proof, &root).unwrap();
//! assert!(merkle::verify_inclusion(&leaves[4], 3, 5, &proof, &root).is_err());
//! ```

use rs_merkle::MerkleTree;

use crate::hash::{Hash32, node_hash, sha256};

/// Why a proof does not check out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    /// The leaf index is not inside the tree.
    #[error("leaf index {index} is outside a tree of size {size}")]
    IndexOutOfRange {
        /// The claimed index.
        index: u64,
        /// The claimed tree size.
        size: u64,
    },
    /// The proof has the wrong number of hashes for its index and size.
    #[error("proof has {got} hashes, {want} expected")]
    WrongLength {
        /// Hashes in the proof.
        got: usize,
        /// Hashes the index and size require.
        want: usize,
    },
    /// The first size of a consistency proof is larger than the second.
    #[error("consistency proof from size {size1} to smaller size {size2}")]
    SizesReversed {
        /// Older size.
        size1: u64,
        /// Newer size.
        size2: u64,
    },
    /// The recomputed root differs from the expected one.
    #[error("recomputed root does not match")]
    RootMismatch,
}

/// The RFC 6962 hasher for `rs_merkle`: interior nodes are `SHA-256(0x01 ‖ l ‖ r)`, an odd
/// node is promoted unchanged. Leaves are hashed by the caller with [`crate::hash::leaf_hash`].
#[derive(Clone, Debug)]
pub struct Rfc6962;

impl rs_merkle::Hasher for Rfc6962 {
    type Hash = [u8; 32];

    fn hash(data: &[u8]) -> [u8; 32] {
        sha256(&[data]).0
    }

    fn concat_and_hash(left: &[u8; 32], right: Option<&[u8; 32]>) -> [u8; 32] {
        match right {
            Some(r) => node_hash(&Hash32(*left), &Hash32(*r)).0,
            None => *left,
        }
    }
}

/// The root of the empty tree: `SHA-256("")`.
pub fn empty_root() -> Hash32 {
    sha256(&[])
}

/// The RFC 6962 root of `leaves` (already leaf-hashed).
pub fn root(leaves: &[Hash32]) -> Hash32 {
    if leaves.is_empty() {
        return empty_root();
    }
    let raw: Vec<[u8; 32]> = leaves.iter().map(|h| h.0).collect();
    match MerkleTree::<Rfc6962>::from_leaves(&raw).root() {
        Some(r) => Hash32(r),
        None => empty_root(),
    }
}

/// The audit path of leaf `index`, from the leaf's sibling up to the root's child.
pub fn inclusion_proof(leaves: &[Hash32], index: usize) -> Option<Vec<Hash32>> {
    if index >= leaves.len() {
        return None;
    }
    let raw: Vec<[u8; 32]> = leaves.iter().map(|h| h.0).collect();
    let tree = MerkleTree::<Rfc6962>::from_leaves(&raw);
    Some(
        tree.proof(&[index])
            .proof_hashes()
            .iter()
            .map(|h| Hash32(*h))
            .collect(),
    )
}

/// `x >> n`, where shifting by 64 or more gives 0 (as in Go, whose verifier this follows):
/// a plain `>>` by 64 panics in debug builds and is masked to `>> 0` in release.
fn shr(x: u64, n: usize) -> u64 {
    u32::try_from(n)
        .ok()
        .and_then(|n| x.checked_shr(n))
        .unwrap_or(0)
}

/// `1 << n`, or `None` when the bit would fall off the top (`n ≥ 64`).
fn pow2(n: usize) -> Option<u64> {
    u32::try_from(n).ok().and_then(|n| 1u64.checked_shl(n))
}

/// Number of proof hashes below the point where the paths of `index` and `size - 1` join,
/// and above it (RFC 9162 §2.1.3.2, decomposed as in transparency-dev). `size ≥ 1`.
///
/// `inner` is the bit length of `index ^ (size - 1)`, up to 64: a tree of more than 2^63
/// leaves has paths of 64 inner hashes, and then `index >> inner` is 0, not a panic.
fn decompose(index: u64, size: u64) -> (usize, usize) {
    let inner = (64 - (index ^ size.saturating_sub(1)).leading_zeros()) as usize;
    let border = shr(index, inner).count_ones() as usize;
    (inner, border)
}

fn chain_inner(mut seed: Hash32, proof: &[Hash32], index: u64) -> Hash32 {
    for (i, h) in proof.iter().enumerate() {
        seed = if shr(index, i) & 1 == 0 {
            node_hash(&seed, h)
        } else {
            node_hash(h, &seed)
        };
    }
    seed
}

fn chain_inner_right(mut seed: Hash32, proof: &[Hash32], index: u64) -> Hash32 {
    for (i, h) in proof.iter().enumerate() {
        if shr(index, i) & 1 == 1 {
            seed = node_hash(h, &seed);
        }
    }
    seed
}

fn chain_border_right(mut seed: Hash32, proof: &[Hash32]) -> Hash32 {
    for h in proof {
        seed = node_hash(h, &seed);
    }
    seed
}

/// Recomputes the root from a leaf hash and its audit path.
pub fn root_from_inclusion_proof(
    leaf: &Hash32,
    index: u64,
    size: u64,
    proof: &[Hash32],
) -> Result<Hash32, ProofError> {
    if index >= size {
        return Err(ProofError::IndexOutOfRange { index, size });
    }
    let (inner, border) = decompose(index, size);
    let Some((inner_path, border_path)) = proof
        .split_at_checked(inner)
        .filter(|(_, b)| b.len() == border)
    else {
        return Err(ProofError::WrongLength {
            got: proof.len(),
            want: inner + border,
        });
    };
    let r = chain_inner(*leaf, inner_path, index);
    Ok(chain_border_right(r, border_path))
}

/// Checks that `leaf` is at `index` in the tree of `size` leaves with root `root`.
pub fn verify_inclusion(
    leaf: &Hash32,
    index: u64,
    size: u64,
    proof: &[Hash32],
    root: &Hash32,
) -> Result<(), ProofError> {
    if root_from_inclusion_proof(leaf, index, size, proof)? != *root {
        return Err(ProofError::RootMismatch);
    }
    Ok(())
}

/// A consistency proof that the tree of the first `size1` leaves is a prefix of `leaves`
/// (RFC 6962 §2.1.2, `PROOF(m, D[n])`).
pub fn consistency_proof(leaves: &[Hash32], size1: usize) -> Option<Vec<Hash32>> {
    if size1 > leaves.len() {
        return None;
    }
    if size1 == 0 || size1 == leaves.len() {
        return Some(Vec::new());
    }
    let mut out = Vec::new();
    subproof(size1, leaves, true, &mut out);
    Some(out)
}

fn subproof(m: usize, d: &[Hash32], complete: bool, out: &mut Vec<Hash32>) {
    let n = d.len();
    if m == n {
        if !complete {
            out.push(root(d));
        }
        return;
    }
    // 1 ≤ m < n here, so n ≥ 2 and k < n.
    let k = split(n);
    let Some((left, right)) = d.split_at_checked(k) else {
        return;
    };
    if m <= k {
        subproof(m, left, complete, out);
        out.push(root(right));
    } else {
        subproof(m - k, right, false, out);
        out.push(root(left));
    }
}

/// The largest power of two strictly below `n` (`n ≥ 2`; 1 for smaller `n`).
fn split(n: usize) -> usize {
    // 2^⌊log2(n - 1)⌋: the exponent is below `usize::BITS`, so the shift cannot overflow (a
    // doubling loop would wrap to 0 and never end for `n > 2^63`).
    n.saturating_sub(1).checked_ilog2().map_or(1, |b| 1 << b)
}

/// Checks that the tree of size `size1` with root `root1` is a prefix of the tree of size
/// `size2` with root `root2` (RFC 9162 §2.1.4.2).
pub fn verify_consistency(
    size1: u64,
    size2: u64,
    root1: &Hash32,
    root2: &Hash32,
    proof: &[Hash32],
) -> Result<(), ProofError> {
    if size2 < size1 {
        return Err(ProofError::SizesReversed { size1, size2 });
    }
    if size1 == size2 {
        if !proof.is_empty() {
            return Err(ProofError::WrongLength {
                got: proof.len(),
                want: 0,
            });
        }
        return if root1 == root2 {
            Ok(())
        } else {
            Err(ProofError::RootMismatch)
        };
    }
    if size1 == 0 {
        // Every tree extends the empty tree; the proof is empty.
        if !proof.is_empty() {
            return Err(ProofError::WrongLength {
                got: proof.len(),
                want: 0,
            });
        }
        return Ok(());
    }
    if proof.is_empty() {
        return Err(ProofError::WrongLength { got: 0, want: 1 });
    }
    let (inner, border) = decompose(size1 - 1, size2);
    // size1 ≥ 1, so shift ≤ 63; and shift < inner because size1 < size2: the low `shift` bits
    // of size1 - 1 are ones, so size2 - 1 first differs from it above them.
    let shift = size1.trailing_zeros() as usize;
    let inner = inner.saturating_sub(shift);
    // The proof starts with the root of the 2^shift subtree, unless size1 is that subtree.
    let perfect = pow2(shift) == Some(size1);
    let (seed, rest) = match proof.split_first() {
        _ if perfect => (*root1, proof),
        Some((first, rest)) => (*first, rest),
        None => return Err(ProofError::WrongLength { got: 0, want: 1 }),
    };
    let Some((inner_path, border_path)) = rest
        .split_at_checked(inner)
        .filter(|(_, b)| b.len() == border)
    else {
        let want = inner + border + usize::from(!perfect);
        return Err(ProofError::WrongLength {
            got: proof.len(),
            want,
        });
    };
    let mask = shr(size1 - 1, shift);
    let h1 = chain_border_right(chain_inner_right(seed, inner_path, mask), border_path);
    if h1 != *root1 {
        return Err(ProofError::RootMismatch);
    }
    let h2 = chain_border_right(chain_inner(seed, inner_path, mask), border_path);
    if h2 != *root2 {
        return Err(ProofError::RootMismatch);
    }
    Ok(())
}

/// Builds an RFC 6962 root one leaf at a time, keeping only the roots of the perfect subtrees
/// on the right edge (at most 64 hashes). Appending costs one leaf plus amortised one node hash.
#[derive(Debug, Clone, Default)]
pub struct CompactRange {
    /// `(height, hash)` of each perfect subtree, tallest first.
    stack: Vec<(u32, Hash32)>,
    size: u64,
}

impl CompactRange {
    /// An empty range.
    pub fn new() -> CompactRange {
        CompactRange::default()
    }

    /// Leaves appended so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends one leaf hash.
    pub fn push(&mut self, leaf: Hash32) {
        let mut node = (0u32, leaf);
        while let Some(&(h, left)) = self.stack.last() {
            if h != node.0 {
                break;
            }
            self.stack.pop();
            node = (h + 1, node_hash(&left, &node.1));
        }
        self.stack.push(node);
        self.size += 1;
    }

    /// The RFC 6962 root of the leaves appended so far.
    pub fn root(&self) -> Hash32 {
        let mut it = self.stack.iter().rev();
        let Some(&(_, mut acc)) = it.next() else {
            return empty_root();
        };
        for (_, left) in it {
            acc = node_hash(left, &acc);
        }
        acc
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::hash::leaf_hash;
    use proptest::prelude::*;

    /// The definition in RFC 6962 §2.1, recursively.
    pub(crate) fn naive_root(d: &[Hash32]) -> Hash32 {
        match d.len() {
            0 => empty_root(),
            1 => d[0],
            n => {
                let k = split(n);
                node_hash(&naive_root(&d[..k]), &naive_root(&d[k..]))
            }
        }
    }

    /// RFC 6962 §2.1.1 `PATH(m, D[n])`, recursively.
    fn naive_path(m: usize, d: &[Hash32]) -> Vec<Hash32> {
        if d.len() <= 1 {
            return Vec::new();
        }
        let k = split(d.len());
        if m < k {
            let mut p = naive_path(m, &d[..k]);
            p.push(naive_root(&d[k..]));
            p
        } else {
            let mut p = naive_path(m - k, &d[k..]);
            p.push(naive_root(&d[..k]));
            p
        }
    }

    fn leaves(n: usize) -> Vec<Hash32> {
        (0..n as u64).map(|i| leaf_hash(&i.to_be_bytes())).collect()
    }

    #[test]
    fn roots_and_proofs_match_naive_reference_for_sizes_0_to_300() {
        let all = leaves(300);
        let mut cr = CompactRange::new();
        for n in 0..=300usize {
            let d = &all[..n];
            let want = naive_root(d);
            assert_eq!(root(d), want, "rs_merkle root, size {n}");
            assert_eq!(cr.root(), want, "compact range root, size {n}");
            for m in [0, n / 3, n / 2, n.saturating_sub(1)] {
                if m < n {
                    let p = inclusion_proof(d, m).unwrap();
                    assert_eq!(p, naive_path(m, d), "path {m} of {n}");
                    verify_inclusion(&d[m], m as u64, n as u64, &p, &want).unwrap();
                }
            }
            if n < 300 {
                cr.push(all[n]);
            }
        }
    }

    /// `n` distinct stand-in hashes for proofs of trees too large to build.
    fn fake(n: usize) -> Vec<Hash32> {
        (0..n as u64)
            .map(|i| leaf_hash(&[b"x".as_slice(), &i.to_be_bytes()].concat()))
            .collect()
    }

    /// Sizes near 2^64 give paths of 64 inner hashes (`index >> 64` in `decompose`) and
    /// subtrees of 2^63 (`1 << 63` in `verify_consistency`): typed errors or correct roots,
    /// never a shift-overflow panic (this runs in debug builds, where a plain `>> 64` panics).
    #[test]
    fn extreme_indices_and_sizes_do_not_panic() {
        let leaf = leaf_hash(b"leaf");
        let other = leaf_hash(b"other");

        // The last leaf of a tree of 2^64 - 1: its siblings are the 63 perfect subtrees to
        // its left (border only).
        let (index, size) = (u64::MAX - 1, u64::MAX);
        assert_eq!(decompose(index, size), (0, 63));
        let p = fake(63);
        let want = p.iter().fold(leaf, |acc, h| node_hash(h, &acc));
        assert_eq!(root_from_inclusion_proof(&leaf, index, size, &p), Ok(want));
        verify_inclusion(&leaf, index, size, &p, &want).unwrap();
        assert_eq!(
            verify_inclusion(&other, index, size, &p, &want),
            Err(ProofError::RootMismatch)
        );
        assert_eq!(
            root_from_inclusion_proof(&leaf, index, size, &p[..62]),
            Err(ProofError::WrongLength { got: 62, want: 63 })
        );
        assert_eq!(
            root_from_inclusion_proof(&leaf, u64::MAX, size, &p),
            Err(ProofError::IndexOutOfRange {
                index: u64::MAX,
                size
            })
        );

        // Leaf 0 of 2^64 - 1 (and of 2^63 + 1): 64 inner hashes, `index >> 64` is 0.
        for size in [u64::MAX, (1 << 63) + 1] {
            assert_eq!(decompose(0, size), (64, 0));
            let p = fake(64);
            let want = p.iter().fold(leaf, |acc, h| node_hash(&acc, h));
            assert_eq!(root_from_inclusion_proof(&leaf, 0, size, &p), Ok(want));
            assert_eq!(
                verify_inclusion(&leaf, 0, size, &p[..63], &want),
                Err(ProofError::WrongLength { got: 63, want: 64 })
            );
        }
        // The first leaf of the right half, and a middle leaf.
        assert_eq!(decompose(1 << 63, u64::MAX), (63, 1));
        assert!(root_from_inclusion_proof(&leaf, 1 << 63, u64::MAX, &fake(64)).is_ok());
        let (inner, border) = decompose(u64::MAX / 3, u64::MAX);
        assert_eq!(
            root_from_inclusion_proof(&leaf, u64::MAX / 3, u64::MAX, &[]),
            Err(ProofError::WrongLength {
                got: 0,
                want: inner + border
            })
        );

        // Consistency from the perfect left half 2^63 to 2^64 - 1: one hash, the right half.
        let root1 = leaf_hash(b"left half");
        let right = leaf_hash(b"right half");
        let root2 = node_hash(&root1, &right);
        verify_consistency(1 << 63, u64::MAX, &root1, &root2, &[right]).unwrap();
        assert_eq!(
            verify_consistency(1 << 63, u64::MAX, &root1, &root1, &[right]),
            Err(ProofError::RootMismatch)
        );
        // From size 1 to 2^64 - 1: 64 inner hashes.
        let p = fake(64);
        let root2 = p.iter().fold(leaf, |acc, h| node_hash(&acc, h));
        verify_consistency(1, u64::MAX, &leaf, &root2, &p).unwrap();
        assert_eq!(
            verify_consistency(1, u64::MAX, &leaf, &root2, &p[..63]),
            Err(ProofError::WrongLength { got: 63, want: 64 })
        );
        // From 2^64 - 2 to 2^64 - 1: a seed plus 63 hashes; garbage of the right length
        // fails to match, a short proof is a typed length error.
        assert_eq!(
            verify_consistency(u64::MAX - 1, u64::MAX, &leaf, &other, &fake(64)),
            Err(ProofError::RootMismatch)
        );
        assert_eq!(
            verify_consistency(u64::MAX - 1, u64::MAX, &leaf, &other, &fake(5)),
            Err(ProofError::WrongLength { got: 5, want: 64 })
        );
        assert_eq!(
            verify_consistency(u64::MAX, u64::MAX - 1, &leaf, &other, &fake(5)),
            Err(ProofError::SizesReversed {
                size1: u64::MAX,
                size2: u64::MAX - 1
            })
        );
        assert_eq!(
            verify_consistency(u64::MAX, u64::MAX, &leaf, &leaf, &[]),
            Ok(())
        );

        // The split of a huge size terminates and is the top bit.
        assert_eq!(split(usize::MAX), 1 << (usize::BITS - 1));
        assert_eq!(split(2), 1);
        assert_eq!(split(5), 4);
        assert_eq!(split(8), 4);
    }

    proptest! {
        #[test]
        fn every_inclusion_proof_verifies_and_tampering_fails(n in 1usize..200, m in any::<prop::sample::Index>(), bit in 0usize..256) {
            let d = leaves(n);
            let m = m.index(n);
            let r = root(&d);
            let p = inclusion_proof(&d, m).unwrap();
            verify_inclusion(&d[m], m as u64, n as u64, &p, &r).unwrap();
            if !p.is_empty() {
                let mut q = p.clone();
                let j = bit % q.len();
                q[j].0[bit / 8 % 32] ^= 1 << (bit % 8);
                prop_assert!(verify_inclusion(&d[m], m as u64, n as u64, &q, &r).is_err());
            }
            prop_assert!(verify_inclusion(&d[m], m as u64 + n as u64, n as u64, &p, &r).is_err());
        }

        #[test]
        fn every_consistency_proof_verifies(n in 1usize..150, m in any::<prop::sample::Index>()) {
            let d = leaves(n);
            let m = m.index(n + 1);
            let p = consistency_proof(&d, m).unwrap();
            verify_consistency(m as u64, n as u64, &root(&d[..m]), &root(&d), &p).unwrap();
            if m > 0 && m < n {
                let mut q = p.clone();
                q[0].0[0] ^= 1;
                prop_assert!(verify_consistency(m as u64, n as u64, &root(&d[..m]), &root(&d), &q).is_err());
            }
        }
    }
}
