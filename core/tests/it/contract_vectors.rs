//! `contracts/test/vectors/inclusion-cases.json`, which the Solidity verifier is tested against,
//! regenerated with this crate and compared byte for byte.
//!
//! The file comes from `scripts/gen-inclusion-cases.py`, a naive recursive RFC 6962 reference.
//! Its format, from the script: leaf `i` is the record `u64be(i)`; cases ordered by size
//! (1..=64) then index; compact JSON, keys in the order size, index, leafHash, proof, root;
//! lower-case `0x` hex; one trailing newline. Equal bytes mean the contract and the Rust core
//! agree on every root and every audit path of every tree up to 64 leaves.

use afr_core::{
    hash::{Hash32, leaf_hash},
    merkle,
};
use serde::Serialize;

use crate::{read, workspace_dir};

const MAX_SIZE: u64 = 64;

/// One case; the field order is the file's key order.
#[derive(Serialize)]
struct InclusionCase {
    size: u64,
    index: u64,
    #[serde(rename = "leafHash")]
    leaf_hash: String,
    proof: Vec<String>,
    root: String,
}

#[derive(Serialize)]
struct File {
    cases: Vec<InclusionCase>,
}

fn hx(h: &Hash32) -> String {
    format!("0x{}", h.to_hex())
}

fn render() -> String {
    let mut cases = Vec::new();
    for size in 1..=MAX_SIZE {
        let leaves: Vec<Hash32> = (0..size).map(|i| leaf_hash(&i.to_be_bytes())).collect();
        let root = merkle::root(&leaves);
        for index in 0..size {
            let proof = merkle::inclusion_proof(&leaves, index as usize).unwrap();
            // Every case also verifies with our verifier, so prover, verifier and file agree.
            merkle::verify_inclusion(&leaves[index as usize], index, size, &proof, &root).unwrap();
            cases.push(InclusionCase {
                size,
                index,
                leaf_hash: hx(&leaves[index as usize]),
                proof: proof.iter().map(hx).collect(),
                root: hx(&root),
            });
        }
    }
    serde_json::to_string(&File { cases }).unwrap() + "\n"
}

#[test]
fn inclusion_cases_json_is_reproduced_byte_for_byte() {
    let path = workspace_dir().join("contracts/test/vectors/inclusion-cases.json");
    let want = String::from_utf8(read(&path)).unwrap();
    let got = render();
    assert_eq!(got.matches("\"size\":").count(), (1..=64).sum::<usize>());
    if got != want {
        let at = got
            .bytes()
            .zip(want.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        let lo = at.saturating_sub(80);
        panic!(
            "{} differs from afr-core's output at byte {at} (lengths {} vs {}):\n file: {}\n core: {}",
            path.display(),
            want.len(),
            got.len(),
            &want[lo..(at + 80).min(want.len())],
            &got[lo..(at + 80).min(got.len())],
        );
    }
}
