//! `afr-verify` against a real chain: a local anvil started here from the project's pinned
//! Foundry, the real contract artifact deployed with `cast`, roots anchored with `cast send`
//! by the recorder's own key, then every way of reading anchors: `--rpc` at the latest block,
//! `--block` in the past, and `afr-verify anchors` fetched once for `--anchors`.

use std::{path::Path, process::Command};

use afr_core::{Hash32, epoch::back_pointer};
use afr_testkit::anvil;
use afr_verify::tamper::{History, Rng};

const KEY: &str = afr_testkit::DEV_KEY;
const ADDR: &str = afr_testkit::DEV_ADDR;

/// Runs `cast` and returns its stdout as JSON (or as a JSON string if it is not JSON).
fn cast(args: &[&str]) -> serde_json::Value {
    let out = afr_testkit::cast(args);
    serde_json::from_str(&out).unwrap_or(serde_json::Value::String(out))
}

fn send(url: &str, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["send", "--json", "--rpc-url", url, "--private-key", KEY];
    a.extend_from_slice(args);
    let r = cast(&a);
    assert_eq!(r["status"], "0x1", "transaction failed: {r}");
    r
}

/// Deploys the checked-in AfrAnchor artifact with `cast send --create`; returns its address.
fn deploy(url: &str) -> String {
    let artifact: serde_json::Value =
        serde_json::from_str(include_str!("../../../anchorer/artifacts/AfrAnchor.json")).unwrap();
    let code = artifact["bytecode"]["object"].as_str().unwrap();
    send(url, &["--create", code])["contractAddress"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn run(args: &[&std::ffi::OsStr]) -> (i32, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_afr-verify"))
        .args(args)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code().unwrap(), v)
}

fn hx(h: &Hash32) -> String {
    format!("0x{h}")
}

#[test]
fn verifies_against_roots_anchored_on_a_real_chain() {
    let mut chain = anvil();
    let url = chain.url.clone();
    let url = url.as_str();
    let contract = deploy(url);

    // An honest history of at least three epochs, recorded by the anvil account's key.
    let mut recorder = [0u8; 20];
    hex::decode_to_slice(&ADDR[2..], &mut recorder).unwrap();
    let mut seed = 1;
    let log = loop {
        let mut h = History::random(&mut Rng::new(seed), recorder);
        if h.epochs.len() >= 3 {
            break h.seal();
        }
        seed += 1;
    };
    let roots = log.roots();
    let n = roots.len();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("log.afr");
    std::fs::write(&file, log.export()).unwrap();
    let positions = log.positions();
    let last = *positions.last().unwrap();
    let bundle = tmp.path().join("case.bundle");
    std::fs::write(&bundle, log.bundle(&[positions[0], last]).encode()).unwrap();

    // All but the last epoch anchored in one batch.
    let first: Vec<String> = roots[..n - 1].iter().map(hx).collect();
    send(
        url,
        &[
            &contract,
            "anchorBatch(uint64,bytes32[],bytes32)",
            "0",
            &format!("[{}]", first.join(",")),
            &hx(&Hash32::ZERO),
        ],
    );
    let before = cast(&["block-number", "--rpc-url", url]);
    let before = before
        .as_u64()
        .map_or_else(|| before.to_string(), |b| b.to_string());
    let rpc = |f: &Path, extra: &[&str]| {
        let mut a: Vec<&std::ffi::OsStr> = vec![
            "log".as_ref(),
            f.as_os_str(),
            "--rpc".as_ref(),
            url.as_ref(),
            "--contract".as_ref(),
            contract.as_ref(),
            "--json".as_ref(),
        ];
        a.extend(extra.iter().map(std::ffi::OsStr::new));
        run(&a)
    };
    let (code, v) = rpc(&file, &[]);
    assert_eq!(code, 2, "{v}");
    assert!(
        v["missing"].to_string().contains(&format!("[{}]", n - 1)),
        "the last epoch is inside the compromise window: {v}"
    );
    assert_eq!(v["checks"]["anchored-root"], n - 1);

    // The last epoch anchored on its own, linked by its back-pointer: verified.
    let last_epoch = (n - 1).to_string();
    send(
        url,
        &[
            &contract,
            "anchor(uint64,bytes32,bytes32)",
            &last_epoch,
            &hx(&roots[n - 1]),
            &hx(&back_pointer(n as u64 - 1, &roots[n - 2])),
        ],
    );
    let (code, v) = rpc(&file, &[]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["outcome"], "verified");
    assert_eq!(v["checks"]["anchored-root"], n);
    assert!(v["notes"].to_string().contains("chain 31337"), "{v}");
    assert!(
        v["notes"].to_string().contains("AfrAnchor code checked"),
        "{v}"
    );
    assert!(
        v["notes"].to_string().contains("taken from the file"),
        "{v}"
    );

    // The recorder pinned: the right one passes, any other is tampered.
    let (code, v) = rpc(&file, &["--recorder", ADDR]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["checks"]["recorder-id"], 1);
    let other = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";
    let (code, v) = rpc(&file, &["--recorder", other]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["first_failure"]["check"], "recorder-id", "{v}");

    // Roots from an address that is not the AfrAnchor code prove nothing: incomplete, and
    // `afr-verify anchors` refuses to write them.
    let (code, v) = run(&[
        "log".as_ref(),
        file.as_os_str(),
        "--rpc".as_ref(),
        url.as_ref(),
        "--contract".as_ref(),
        other.as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(code, 2, "{v}");
    assert!(
        v["missing"]
            .to_string()
            .contains("not the AfrAnchor contract"),
        "{v}"
    );
    let (code, _) = run(&[
        "anchors".as_ref(),
        "--rpc".as_ref(),
        url.as_ref(),
        "--contract".as_ref(),
        other.as_ref(),
        "--recorder".as_ref(),
        ADDR.as_ref(),
        "--out".as_ref(),
        tmp.path().join("bad.json").as_os_str(),
    ]);
    assert_eq!(code, 74);

    // Read at the block before the last anchor: the chain's past says incomplete.
    let (code, v) = rpc(&file, &["--block", &before]);
    assert_eq!(code, 2, "{v}");

    // The bundle of the first and last events, against the chain.
    let (code, v) = run(&[
        "bundle".as_ref(),
        bundle.as_os_str(),
        "--rpc".as_ref(),
        url.as_ref(),
        "--contract".as_ref(),
        contract.as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["opened"].as_array().map(Vec::len), Some(2), "{v}");

    // A host attacker re-seals a different history for the same recorder from a common
    // prefix: every file check passes, the anchored root does not.
    let mut h = History::random(&mut Rng::new(seed), recorder);
    h.epochs.last_mut().unwrap().pop();
    let forked = h.seal();
    let fork_file = tmp.path().join("fork.afr");
    std::fs::write(&fork_file, forked.export()).unwrap();
    assert_eq!(
        afr_core::verify::verify_log(&forked.export()).outcome,
        afr_core::verify::Outcome::Verified
    );
    let (code, v) = rpc(&fork_file, &[]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["first_failure"]["check"], "anchored-root", "{v}");
    assert_eq!(v["first_failure"]["location"], format!("epoch {}", n - 1));

    // Fetched once, then verified offline against the file, which the report says it trusted.
    let anchors = tmp.path().join("anchors.json");
    let (code, _) = run(&[
        "anchors".as_ref(),
        "--rpc".as_ref(),
        url.as_ref(),
        "--contract".as_ref(),
        contract.as_ref(),
        "--recorder".as_ref(),
        ADDR.as_ref(),
        "--out".as_ref(),
        anchors.as_os_str(),
    ]);
    assert_eq!(code, 0);
    chain.kill();
    let (code, v) = run(&[
        "log".as_ref(),
        file.as_os_str(),
        "--anchors".as_ref(),
        anchors.as_os_str(),
        "--json".as_ref(),
    ]);
    assert_eq!(code, 0, "{v}");
    assert!(v["notes"].to_string().contains("TRUSTED"), "{v}");

    // The chain is gone: asking it is an I/O error (74), not a verdict.
    let (code, _) = rpc(&file, &[]);
    assert_eq!(code, 74);
}

#[test]
fn reads_hundreds_of_anchored_roots_in_batched_calls() {
    let chain = anvil();
    let url = chain.url.as_str();
    let contract = deploy(url);
    let mut recorder = [0u8; 20];
    hex::decode_to_slice(&ADDR[2..], &mut recorder).unwrap();
    // 600 epochs: more than two JSON-RPC batches of rootOf calls.
    let mut h = History::random(&mut Rng::new(7), recorder);
    let base = h.epochs.clone();
    h.epochs = (0..600).map(|i| base[i % base.len()].clone()).collect();
    let log = h.seal();
    let roots: Vec<String> = log.roots().iter().map(hx).collect();
    for (i, chunk) in roots.chunks(200).enumerate() {
        let prev = if i == 0 {
            Hash32::ZERO
        } else {
            back_pointer(1, &log.roots()[i * 200 - 1])
        };
        send(
            url,
            &[
                &contract,
                "anchorBatch(uint64,bytes32[],bytes32)",
                &(i * 200).to_string(),
                &format!("[{}]", chunk.join(",")),
                &hx(&prev),
            ],
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("log.afr");
    std::fs::write(&file, log.export()).unwrap();
    let (code, v) = run(&[
        "log".as_ref(),
        file.as_os_str(),
        "--rpc".as_ref(),
        url.as_ref(),
        "--contract".as_ref(),
        contract.as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["checks"]["anchored-root"], 600);
}
