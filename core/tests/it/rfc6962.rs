//! The RFC 6962 inclusion and consistency vectors of transparency-dev/merkle (Apache-2.0,
//! `core/tests/data/rfc6962/LICENSE`), run through our verifiers.
//!
//! Each vector is a JSON file with base64 hashes and a `wantErr` flag. A field that does not
//! decode to 32 bytes cannot be a SHA-256 hash, so it counts as an error (never a panic): our
//! API takes typed [`Hash32`] values, and a vector that needs a 15-byte "root" to pass is named
//! in [`UNTYPED_HAPPY_PATHS`] and checked in its typed form instead.
//!
//! The vectors are read from the checked-in copy in `core/tests/data/rfc6962/`, so CI does not
//! depend on `../shared`. When `../shared` (or `$AFR_SHARED_DIR`) is present, the copy is also
//! compared with it file by file.

use std::path::{Path, PathBuf};

use afr_core::{
    hash::{Hash32, leaf_hash},
    merkle,
};
use base64::{Engine, engine::general_purpose::STANDARD as B64};
use serde_json::Value;

use crate::{core_dir, read, shared_dir};

/// Files in `inclusion/**` and `consistency/**`; a changed count means vectors went missing.
const INCLUSION_CASES: usize = 98;
const CONSISTENCY_CASES: usize = 98;
/// Of those, the happy paths (`wantErr: false`).
const INCLUSION_HAPPY: usize = 6;
const CONSISTENCY_HAPPY: usize = 6;

/// Happy-path vectors whose hashes are not 32 bytes. transparency-dev compares roots of equal
/// trees as byte strings of any length; our verifier takes [`Hash32`], so such a vector cannot
/// be passed to it as is. It is checked with a 32-byte stand-in for its (equal) roots.
const UNTYPED_HAPPY_PATHS: &[&str] =
    &["consistency/additional/sizes-are-equal-one-and-proof-is-empty.json"];

/// The eight leaf inputs of the RFC 6962 test tree used by Certificate Transparency and
/// transparency-dev (hex).
const TEST_LEAVES: [&str; 8] = [
    "",
    "00",
    "10",
    "2021",
    "3031",
    "40414243",
    "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
];

/// The root of the eight-leaf test tree, as published with the RFC 6962 reference code.
const TEST_ROOT_8: &str = "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328";

fn test_leaves() -> Vec<Hash32> {
    TEST_LEAVES
        .iter()
        .map(|h| leaf_hash(&hex::decode(h).unwrap()))
        .collect()
}

/// The vectors to run: the checked-in copy, else the shared folder; `None` if neither exists.
fn vectors_dir() -> Option<PathBuf> {
    let copy = core_dir().join("tests/data/rfc6962");
    if copy.is_dir() {
        return Some(copy);
    }
    let shared = shared_dir().join("testvectors/rfc6962");
    shared.is_dir().then_some(shared)
}

/// Every `*.json` below `dir`, sorted, as paths relative to `root`.
fn json_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            json_files(root, &p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p.strip_prefix(root).unwrap().to_path_buf());
        }
    }
}

struct Case {
    /// Path relative to the vectors folder, with `/` separators.
    name: String,
    json: Value,
    want_err: bool,
}

fn load(kind: &str) -> Option<Vec<Case>> {
    let Some(root) = vectors_dir() else {
        eprintln!(
            "SKIP rfc6962 {kind} vectors: neither core/tests/data/rfc6962 nor {} exists \
             (set AFR_SHARED_DIR to the folder holding testvectors/)",
            shared_dir().join("testvectors/rfc6962").display()
        );
        return None;
    };
    let mut files = Vec::new();
    json_files(&root, &root.join(kind), &mut files);
    let cases = files
        .into_iter()
        .map(|rel| {
            let json: Value = serde_json::from_slice(&read(&root.join(&rel)))
                .unwrap_or_else(|e| panic!("{}: {e}", rel.display()));
            let want_err = json["wantErr"]
                .as_bool()
                .unwrap_or_else(|| panic!("{}: no boolean wantErr", rel.display()));
            let name = rel.to_string_lossy().replace('\\', "/");
            Case {
                name,
                json,
                want_err,
            }
        })
        .collect();
    Some(cases)
}

fn uint(v: &Value, field: &str) -> Result<u64, String> {
    v[field]
        .as_u64()
        .ok_or_else(|| format!("{field} is not a u64"))
}

/// A base64 field that must hold exactly 32 bytes.
fn hash(v: &Value, field: &str) -> Result<Hash32, String> {
    let s = v[field]
        .as_str()
        .ok_or_else(|| format!("{field} is not a string"))?;
    let b = B64.decode(s).map_err(|e| format!("{field}: {e}"))?;
    Hash32::from_slice(&b).ok_or_else(|| format!("{field} has {} bytes, not 32", b.len()))
}

/// A proof: `null` or a list of 32-byte base64 hashes.
fn proof(v: &Value) -> Result<Vec<Hash32>, String> {
    match &v["proof"] {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let s = item
                    .as_str()
                    .ok_or_else(|| format!("proof[{i}] is not a string"))?;
                let b = B64.decode(s).map_err(|e| format!("proof[{i}]: {e}"))?;
                Hash32::from_slice(&b).ok_or_else(|| format!("proof[{i}] has {} bytes", b.len()))
            })
            .collect(),
        _ => Err("proof is neither null nor an array".into()),
    }
}

fn run_inclusion(c: &Value) -> Result<(), String> {
    let (index, size) = (uint(c, "leafIdx")?, uint(c, "treeSize")?);
    let (leaf, root, proof) = (hash(c, "leafHash")?, hash(c, "root")?, proof(c)?);
    merkle::verify_inclusion(&leaf, index, size, &proof, &root).map_err(|e| e.to_string())
}

fn run_consistency(c: &Value) -> Result<(), String> {
    let (size1, size2) = (uint(c, "size1")?, uint(c, "size2")?);
    let (root1, root2, proof) = (hash(c, "root1")?, hash(c, "root2")?, proof(c)?);
    merkle::verify_consistency(size1, size2, &root1, &root2, &proof).map_err(|e| e.to_string())
}

/// Runs every case and checks its outcome against `wantErr`; returns (cases, happy paths).
fn check_all(cases: &[Case], run: fn(&Value) -> Result<(), String>) -> (usize, usize) {
    let mut failures = Vec::new();
    let mut happy = 0;
    for c in cases {
        let got = run(&c.json);
        let desc = c.json["desc"].as_str().unwrap_or("");
        match (c.want_err, got) {
            (true, Ok(())) => failures.push(format!("{} ({desc}): accepted, want error", c.name)),
            (false, Err(e)) if UNTYPED_HAPPY_PATHS.contains(&c.name.as_str()) => {
                // Equal sizes, equal roots, empty proof: the typed form of the same question.
                assert!(e.contains("32"), "{}: {e}", c.name);
                assert_eq!(c.json["root1"], c.json["root2"], "{}", c.name);
                let h = leaf_hash(b"stand-in");
                let (s1, s2) = (
                    uint(&c.json, "size1").unwrap(),
                    uint(&c.json, "size2").unwrap(),
                );
                merkle::verify_consistency(s1, s2, &h, &h, &proof(&c.json).unwrap()).unwrap();
                happy += 1;
            }
            (false, Err(e)) => failures.push(format!("{} ({desc}): rejected: {e}", c.name)),
            (false, Ok(())) => happy += 1,
            (true, Err(_)) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} vectors failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    (cases.len(), happy)
}

/// Checks every `kind` vector (where the vectors are found) with `run`: `want` is (cases,
/// happy paths).
fn check_kind(kind: &str, run: fn(&Value) -> Result<(), String>, want: (usize, usize)) {
    if let Some(cases) = load(kind) {
        assert_eq!(check_all(&cases, run), want);
    }
}

#[test]
fn inclusion_vectors() {
    check_kind(
        "inclusion",
        run_inclusion,
        (INCLUSION_CASES, INCLUSION_HAPPY),
    );
}

#[test]
fn consistency_vectors() {
    check_kind(
        "consistency",
        run_consistency,
        (CONSISTENCY_CASES, CONSISTENCY_HAPPY),
    );
}

#[test]
fn test_tree_root_is_the_published_one() {
    assert_eq!(merkle::root(&test_leaves()).to_hex(), TEST_ROOT_8);
}

/// Our prover reproduces every happy-path proof whose tree is a prefix of the test tree
/// (recognised by its roots), so building and verifying agree with the reference.
#[test]
fn provers_reproduce_happy_path_proofs() {
    let (Some(inc), Some(cons)) = (load("inclusion"), load("consistency")) else {
        return;
    };
    let leaves = test_leaves();
    let prefix_root =
        |n: u64| (n as usize <= leaves.len()).then(|| merkle::root(&leaves[..n as usize]));
    let mut reproduced = (0, 0);
    for c in inc.iter().filter(|c| !c.want_err) {
        let j = &c.json;
        let (index, size) = (uint(j, "leafIdx").unwrap(), uint(j, "treeSize").unwrap());
        if prefix_root(size) != hash(j, "root").ok() {
            continue;
        }
        assert_eq!(
            hash(j, "leafHash").unwrap(),
            leaves[index as usize],
            "{}",
            c.name
        );
        let got = merkle::inclusion_proof(&leaves[..size as usize], index as usize).unwrap();
        assert_eq!(got, proof(j).unwrap(), "{}", c.name);
        reproduced.0 += 1;
    }
    for c in cons.iter().filter(|c| !c.want_err) {
        let j = &c.json;
        let (size1, size2) = (uint(j, "size1").unwrap(), uint(j, "size2").unwrap());
        if prefix_root(size1) != hash(j, "root1").ok()
            || prefix_root(size2) != hash(j, "root2").ok()
        {
            continue;
        }
        let got = merkle::consistency_proof(&leaves[..size2 as usize], size1 as usize).unwrap();
        assert_eq!(got, proof(j).unwrap(), "{}", c.name);
        reproduced.1 += 1;
    }
    // inclusion/{0..4} and consistency/{0..4} are over the test tree.
    assert_eq!(reproduced, (5, 5));
}

/// The checked-in copy equals `../shared/testvectors/rfc6962`, when that folder is here.
#[test]
fn checked_in_copy_matches_shared_folder() {
    let shared = shared_dir().join("testvectors/rfc6962");
    if !shared.is_dir() {
        eprintln!("SKIP copy check: {} does not exist", shared.display());
        return;
    }
    let copy = core_dir().join("tests/data/rfc6962");
    let (mut a, mut b) = (Vec::new(), Vec::new());
    json_files(&copy, &copy, &mut a);
    json_files(&shared, &shared, &mut b);
    assert_eq!(
        a,
        b,
        "the copy and {} list different files",
        shared.display()
    );
    for rel in a.iter().chain([&PathBuf::from("LICENSE")]) {
        assert_eq!(
            read(&copy.join(rel)),
            read(&shared.join(rel)),
            "{} differs",
            rel.display()
        );
    }
}
