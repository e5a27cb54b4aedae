//! `afr-verify` against a real chain: a local anvil started here from the project's pinned
//! Foundry, the real contract artifact deployed with `cast` (plainly, and at the canonical
//! CREATE2 address), roots anchored with `cast send` by the recorder's own key, then every way
//! of reading anchors (`--rpc` at the latest block, `--block` in the past, `afr-verify anchors`
//! for `--anchors`), and the attacks of issue #13, each answered not-verified.

use std::{path::Path, process::Command};

use afr_core::{Hash32, deployment::ARTIFACT, epoch::back_pointer, verify::Outcome};
use afr_eval::tamper::{History, Rng, SealedLog};
use afr_testkit::anvil;
use afr_verify::{Kind, Source, Trust};

use super::assert_incomplete;

pub(crate) const KEY: &str = afr_testkit::DEV_KEY;
pub(crate) const ADDR: &str = afr_testkit::DEV_ADDR;
/// Anvil's second dev account: a victim who never sends a transaction.
pub(crate) const VICTIM: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

/// Runs `cast` and returns its stdout as JSON (or as a JSON string if it is not JSON).
pub(crate) fn cast(args: &[&str]) -> serde_json::Value {
    let out = afr_testkit::cast(args);
    serde_json::from_str(&out).unwrap_or(serde_json::Value::String(out))
}

pub(crate) fn send(url: &str, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["send", "--json", "--rpc-url", url, "--private-key", KEY];
    a.extend_from_slice(args);
    let r = cast(&a);
    assert_eq!(r["status"], "0x1", "transaction failed: {r}");
    r
}

pub(crate) fn artifact(field: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(ARTIFACT).unwrap();
    v[field]["object"].as_str().unwrap().to_owned()
}

/// Deploys the checked-in AfrAnchor artifact with a plain `cast send --create` (not the
/// canonical address); returns its address.
pub(crate) fn deploy(url: &str) -> String {
    send(url, &["--create", &artifact("bytecode")])["contractAddress"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Deploys AfrAnchor through the CREATE2 deployer with the canonical salt.
pub(crate) fn deploy_canonical(url: &str) {
    let data = format!(
        "0x{}{}",
        hex::encode(afr_core::deployment::SALT),
        artifact("bytecode").trim_start_matches("0x")
    );
    send(url, &[afr_core::deployment::CREATE2_DEPLOYER, &data]);
}

pub(crate) fn run(args: &[&std::ffi::OsStr]) -> (i32, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_afr-verify"))
        .args(args)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap(), v, text)
}

pub(crate) fn os(args: &[&str]) -> Vec<std::ffi::OsString> {
    args.iter().map(std::ffi::OsString::from).collect()
}

pub(crate) fn verify_cli(
    cmd: &str,
    file: &Path,
    args: &[&str],
) -> (i32, serde_json::Value, String) {
    let mut a = vec![std::ffi::OsString::from(cmd), file.as_os_str().to_owned()];
    a.extend(os(args));
    let a: Vec<&std::ffi::OsStr> = a.iter().map(|s| s.as_os_str()).collect();
    run(&a)
}

/// `--rpc URL --chain-id 31337 [--contract C] --recorder R [--json]`.
fn pins<'a>(
    url: &'a str,
    contract: Option<&'a str>,
    recorder: &'a str,
    json: bool,
) -> Vec<&'a str> {
    let mut a = vec!["--rpc", url, "--chain-id", "31337"];
    if let Some(c) = contract {
        a.extend(["--contract", c]);
    }
    a.extend(["--recorder", recorder]);
    if json {
        a.push("--json");
    }
    a
}

/// `anchors --rpc URL --chain-id 31337 --contract C --recorder ADDR --out OUT`.
fn anchors_args(url: &str, contract: &str, out: &str) -> Vec<std::ffi::OsString> {
    let mut a = vec!["anchors"];
    a.extend(pins(url, Some(contract), ADDR, false));
    a.extend(["--out", out]);
    os(&a)
}

pub(crate) fn hx(h: &Hash32) -> String {
    format!("0x{h}")
}

pub(crate) fn addr(s: &str) -> [u8; 20] {
    let mut a = [0u8; 20];
    hex::decode_to_slice(&s[2..], &mut a).unwrap();
    a
}

/// An honest history of at least `epochs` epochs for `recorder`.
pub(crate) fn history(recorder: [u8; 20], epochs: usize) -> (History, u64) {
    let mut seed = 1;
    loop {
        let h = History::random(&mut Rng::new(seed), recorder);
        if h.epochs.len() >= epochs {
            return (h, seed);
        }
        seed += 1;
    }
}

/// Anchors `roots[from..]` (epochs `from..`) in one batch, linked to `roots[from - 1]`.
pub(crate) fn anchor_batch(url: &str, contract: &str, roots: &[Hash32], from: usize) {
    let list: Vec<String> = roots[from..].iter().map(hx).collect();
    let prev = if from == 0 {
        Hash32::ZERO
    } else {
        back_pointer(from as u64, &roots[from - 1])
    };
    send(
        url,
        &[
            contract,
            "anchorBatch(uint64,bytes32[],bytes32)",
            &from.to_string(),
            &format!("[{}]", list.join(",")),
            &hx(&prev),
        ],
    );
}

#[test]
fn verifies_against_roots_anchored_on_a_real_chain() {
    let mut chain = anvil();
    let url = chain.url.clone();
    let url = url.as_str();
    let contract = deploy(url);
    let (mut h, seed) = history(addr(ADDR), 3);
    let log = h.seal();
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
    let mut rs = roots.clone();
    rs.pop();
    anchor_batch(url, &contract, &rs, 0);
    let before = cast(&["block-number", "--rpc-url", url]);
    let before = before
        .as_u64()
        .map_or_else(|| before.to_string(), |b| b.to_string());
    let pinned = pins(url, Some(&contract), ADDR, true);
    let rpc = |f: &Path, extra: &[&str]| {
        let mut a = pinned.to_vec();
        a.extend_from_slice(extra);
        verify_cli("log", f, &a)
    };
    let (code, v, _) = rpc(&file, &[]);
    assert_eq!(code, 2, "{v}");
    assert!(
        v["missing"].to_string().contains(&format!("[{}]", n - 1)),
        "the last epoch is inside the compromise window: {v}"
    );
    assert_eq!(v["checks"]["anchored-root"], n - 1);

    // The last epoch anchored on its own, linked by its back-pointer: verified, each root
    // proven by the recorder's own transaction.
    send(
        url,
        &[
            &contract,
            "anchor(uint64,bytes32,bytes32)",
            &(n - 1).to_string(),
            &hx(&roots[n - 1]),
            &hx(&back_pointer(n as u64 - 1, &roots[n - 2])),
        ],
    );
    let (code, v, _) = rpc(&file, &[]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["outcome"], "verified");
    assert_eq!(v["checks"]["anchored-root"], n);
    assert_eq!(v["checks"]["recorder-id"], 1);
    assert_eq!(v["anchors"].as_array().unwrap().len(), n);
    assert_eq!(v["trust"]["canonical_contract"], false);
    assert!(v["notes"].to_string().contains("NOT the canonical"), "{v}");

    // Case 3: nothing pinned but the chain: the best answer is incomplete, with the reason.
    let (code, v, _) = verify_cli(
        "log",
        &file,
        &[
            "--rpc",
            url,
            "--chain-id",
            "31337",
            "--contract",
            &contract,
            "--json",
        ],
    );
    assert_incomplete(code, &v, "no recorder is pinned");
    // --rpc without a pinned chain is a usage error; a wrong chain id is refused.
    let (code, _, text) = verify_cli("log", &file, &["--rpc", url, "--recorder", ADDR]);
    assert_eq!(code, 64, "{text}");
    let (code, _, text) = rpc(&file, &["--chain-id", "10"]);
    assert!(code == 64 || code == 74, "{text}");
    let (code, _, text) = verify_cli(
        "log",
        &file,
        &[
            "--rpc",
            url,
            "--chain-id",
            "10",
            "--contract",
            &contract,
            "--recorder",
            ADDR,
        ],
    );
    assert_eq!(code, 74, "{text}");
    assert!(
        text.contains("serves chain 31337, not the pinned chain 10"),
        "{text}"
    );

    // Another pinned recorder: tampered.
    let (code, v, _) = verify_cli("log", &file, &pins(url, Some(&contract), VICTIM, true));
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["first_failure"]["check"], "recorder-id", "{v}");

    // A trust file pins the same things, and names the party.
    let trust = tmp.path().join("trust.toml");
    std::fs::write(
        &trust,
        format!(
            "chain_id = 31337\ncontract = \"{contract}\"\n[[party]]\nname = \"Acme (operator)\"\nrecorders = [\"{ADDR}\"]\n"
        ),
    )
    .unwrap();
    let (code, v, _) = verify_cli(
        "log",
        &file,
        &["--trust", trust.to_str().unwrap(), "--rpc", url, "--json"],
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["trust"]["party"], "Acme (operator)");

    // Not the AfrAnchor code: incomplete, and `afr-verify anchors` refuses to write from it.
    let (code, v, _) = verify_cli("log", &file, &pins(url, Some(VICTIM), ADDR, true));
    assert_incomplete(code, &v, "not the AfrAnchor contract");
    let bad = tmp.path().join("bad.json");
    let (code, _, _) = run(&anchors_args(url, VICTIM, bad.to_str().unwrap())
        .iter()
        .map(|s| s.as_os_str())
        .collect::<Vec<_>>());
    assert_eq!(code, 74);

    // Read at the block before the last anchor: the chain's past says incomplete.
    let (code, v, _) = rpc(&file, &["--block", &before]);
    assert_eq!(code, 2, "{v}");

    // The bundle of the first and last events, against the chain.
    let (code, v, _) = verify_cli("bundle", &bundle, &pinned);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["opened"].as_array().map(Vec::len), Some(2), "{v}");

    // A host attacker re-seals a different history for the same recorder from a common
    // prefix: every file check passes, the anchored root does not.
    let mut h2 = History::random(&mut Rng::new(seed), addr(ADDR));
    h2.epochs.last_mut().unwrap().pop();
    let forked = h2.seal();
    let fork_file = tmp.path().join("fork.afr");
    std::fs::write(&fork_file, forked.export()).unwrap();
    assert_eq!(
        afr_core::verify::verify_log(&forked.export()).outcome,
        Outcome::Verified
    );
    let (code, v, _) = rpc(&fork_file, &[]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["first_failure"]["check"], "anchored-root", "{v}");
    assert_eq!(v["first_failure"]["location"], format!("epoch {}", n - 1));

    // Fetched once, then verified offline; the file's chain and contract must be the pinned
    // ones, and the report says it trusted the file.
    let anchors = tmp.path().join("anchors.json");
    let args = anchors_args(url, &contract, anchors.to_str().unwrap());
    let (code, _, text) = run(&args.iter().map(|s| s.as_os_str()).collect::<Vec<_>>());
    assert_eq!(code, 0, "{text}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&anchors).unwrap()).unwrap();
    assert!(saved["roots"]["0"]["block"].as_u64().is_some(), "{saved}");
    assert_eq!(
        saved["roots"]["0"]["tx"].as_str().unwrap().len(),
        66,
        "{saved}"
    );
    chain.kill();
    let off = |extra: &[&str]| {
        let mut a = vec![
            "--anchors",
            anchors.to_str().unwrap(),
            "--recorder",
            ADDR,
            "--json",
        ];
        a.extend_from_slice(extra);
        verify_cli("log", &file, &a)
    };
    let (code, v, _) = off(&["--chain-id", "31337", "--contract", &contract]);
    assert_eq!(code, 0, "{v}");
    // A proof archive: re-proven offline, the header hashes listed.
    assert!(v["notes"].to_string().contains("re-proven offline"), "{v}");
    assert_eq!(v["anchors_from"]["source"], "archive", "{v}");
    assert!(
        !v["chain"]["headers"].as_object().unwrap().is_empty(),
        "{v}"
    );
    let (code, v, _) = off(&["--chain-id", "1", "--contract", &contract]);
    assert_eq!(code, 2, "another chain's anchors: {v}");
    let (code, v, _) = off(&["--chain-id", "31337"]);
    assert_eq!(
        code, 2,
        "another contract's anchors (the canonical one is pinned): {v}"
    );

    // The chain is gone: asking it is an I/O error (74), not a verdict.
    let (code, _, _) = rpc(&file, &[]);
    assert_eq!(code, 74);
}

/// Case 1: a look-alike contract with the genuine runtime code, the victim's roots written
/// straight into its storage and `Anchored(victim, ...)` logs emitted by its creation: the
/// victim never sent a transaction, so nothing of it counts as anchored.
#[test]
fn planted_roots_never_frame_a_recorder() {
    let chain = anvil();
    let url = chain.url.as_str();
    let status = Command::new(afr_testkit::tool("forge"))
        .args(["build", "--quiet"])
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .status()
        .unwrap();
    assert!(status.success());
    let planted: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../contracts/out/PlantedAnchor.sol/PlantedAnchor.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let (mut h, _) = history(addr(VICTIM), 2);
    let log = h.seal();
    let roots: Vec<String> = log.roots().iter().map(hx).collect();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("framed.afr");
    std::fs::write(&file, log.export()).unwrap();
    let bundle = tmp.path().join("framed.bundle");
    std::fs::write(&bundle, log.bundle(&log.positions()[..1]).encode()).unwrap();

    // The attacker (anvil's first account) deploys the look-alike.
    let r = send(
        url,
        &[
            "--create",
            planted["bytecode"]["object"].as_str().unwrap(),
            "constructor(bytes,address,bytes32[])",
            &artifact("deployedBytecode"),
            VICTIM,
            &format!("[{}]", roots.join(",")),
        ],
    );
    let fake = r["contractAddress"].as_str().unwrap().to_owned();
    // It really looks genuine: the runtime code matches and rootOf answers the planted roots.
    let code = cast(&["code", &fake, "--rpc-url", url]);
    assert!(
        code.as_str().unwrap().eq_ignore_ascii_case(&format!(
            "0x{}",
            artifact("deployedBytecode").trim_start_matches("0x")
        )),
        "look-alike code differs"
    );
    let root0 = cast(&[
        "call",
        &fake,
        "rootOf(address,uint64)(bytes32)",
        VICTIM,
        "0",
        "--rpc-url",
        url,
    ]);
    assert_eq!(root0.as_str().unwrap(), roots[0]);
    // And the same through anvil_setStorageAt on a copy of the code at another address.
    let other = "0x00000000000000000000000000000000000afaf0";
    cast(&[
        "rpc",
        "anvil_setCode",
        other,
        &artifact("deployedBytecode"),
        "--rpc-url",
        url,
    ]);
    let outer = cast(&[
        "keccak",
        &format!("0x{}{}", "0".repeat(24) + &VICTIM[2..], "0".repeat(64)),
    ]);
    for (e, root) in roots.iter().enumerate() {
        let slot = cast(&[
            "keccak",
            &format!(
                "0x{:064x}{}",
                e,
                outer.as_str().unwrap().trim_start_matches("0x")
            ),
        ]);
        cast(&[
            "rpc",
            "anvil_setStorageAt",
            other,
            slot.as_str().unwrap(),
            root,
            "--rpc-url",
            url,
        ]);
    }
    let root0 = cast(&[
        "call",
        other,
        "rootOf(address,uint64)(bytes32)",
        VICTIM,
        "0",
        "--rpc-url",
        url,
    ]);
    assert_eq!(root0.as_str().unwrap(), roots[0], "storage planted");

    for c in [fake.as_str(), other] {
        for (kind, f) in [("log", &file), ("bundle", &bundle)] {
            let (code, v, _) = verify_cli(kind, f, &pins(url, Some(c), VICTIM, true));
            assert_eq!(code, 2, "{kind} against {c}: {v}");
            assert_ne!(v["outcome"], "verified");
            assert!(v["checks"]["anchored-root"].is_null(), "{v}");
        }
    }
    // The planted logs are seen, and said to be ignored: not sent by the recorder.
    let (_, v, _) = verify_cli("log", &file, &pins(url, Some(&fake), VICTIM, true));
    assert!(
        v["notes"].to_string().contains("not by the recorder"),
        "{v}"
    );
}

/// The canonical deployment: AfrAnchor through the CREATE2 deployer lands at the documented
/// address, and `afr-verify` uses it without `--contract`.
#[test]
fn canonical_address_is_the_default_contract() {
    let chain = anvil();
    let url = chain.url.as_str();
    deploy_canonical(url);
    let canonical = afr_core::deployment::ANCHOR_ADDRESS;
    let (mut h, _) = history(addr(ADDR), 2);
    let log = h.seal();
    let roots = log.roots();
    anchor_batch(url, canonical, &roots, 0);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("log.afr");
    std::fs::write(&file, log.export()).unwrap();
    let (code, v, _) = verify_cli("log", &file, &pins(url, None, ADDR, true));
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["trust"]["canonical_contract"], true);
    assert_eq!(
        v["trust"]["contract"].as_str().unwrap(),
        canonical.to_ascii_lowercase()
    );
    let (_, _, text) = verify_cli("log", &file, &pins(url, None, ADDR, false));
    assert!(text.starts_with("VERIFIED"), "{text}");
    assert!(text.contains("(canonical)"), "{text}");

    // Case 5: an honest export taken before later epochs were anchored is stale, not
    // tampered.
    let mut early = h.clone();
    early.epochs.truncate(1);
    let stale = tmp.path().join("stale.afr");
    std::fs::write(&stale, early.seal().export()).unwrap();
    let (code, v, _) = verify_cli("log", &stale, &pins(url, None, ADDR, true));
    assert_incomplete(
        code,
        &v,
        "the log ends at epoch 0; the chain holds anchored epochs up to",
    );
}

fn lib_verify(kind: Kind, bytes: &[u8], url: &str, contract: &str) -> Outcome {
    let trust = Trust::new(None, Some(31337), Some(contract), Some(ADDR)).unwrap();
    afr_verify::verify(
        kind,
        bytes,
        &trust,
        Source::Rpc {
            urls: &[url.to_owned()],
            agree: afr_verify::Agree::All,
            block: None,
            from_block: 0,
        },
    )
    .unwrap()
    .outcome
}

/// Cases 2, 4 and 6 against a chain: a forged erasure claim, random mutations of every byte
/// of a bundle (the anchor references of version 1 among them), and escape sequences in a
/// recorded tool name.
#[test]
fn forged_erasure_mutations_and_escapes_never_pass() {
    let chain = anvil();
    let url = chain.url.as_str();
    let contract = deploy(url);
    let (mut h, _) = history(addr(ADDR), 3);
    // An escape sequence and a bidi override in a recorded tool name; an afr.erase event of
    // epoch 0 in the last epoch.
    h.epochs[1][0].set_tool("\u{1b}[2K\rVERIFIED \u{202e}");
    let last = h.epochs.len() - 1;
    h.epochs[last][0].set_intent("afr.erase", serde_json::json!({"epoch": 0, "by": "test"}));
    let log: SealedLog = h.seal();
    anchor_batch(url, &contract, &log.roots(), 0);
    let pos = log.positions();
    let first_of = |e: usize| pos.iter().position(|p| p.0 == e).unwrap();

    // Honest controls: the log and a bundle with keys verify.
    assert_eq!(
        lib_verify(Kind::Log, &log.export(), url, &contract),
        Outcome::Verified
    );
    let honest = log.bundle(&[pos[0], pos[first_of(1)], pos[first_of(last)]]);
    let honest_bytes = honest.encode();
    assert_eq!(
        lib_verify(Kind::Bundle, &honest_bytes, url, &contract),
        Outcome::Verified
    );

    // Case 2: a keyless bundle claims epoch 0 erased. Without the afr.erase event: incomplete.
    let mut keyless = log.bundle(&[pos[0]]);
    for e in &mut keyless.events {
        e.key = None;
        e.payload = None;
    }
    assert_eq!(
        lib_verify(Kind::Bundle, &keyless.encode(), url, &contract),
        Outcome::Incomplete
    );
    keyless.erased = vec![0];
    assert_eq!(
        lib_verify(Kind::Bundle, &keyless.encode(), url, &contract),
        Outcome::Incomplete,
        "a forged erasure claim must not verify"
    );
    // With the recorder's afr.erase event for epoch 0, disclosed with its key: proven.
    let mut proven = log.bundle(&[pos[0], pos[first_of(last)]]);
    proven.events[0].key = None;
    proven.events[0].payload = None;
    proven.erased = vec![0];
    assert_eq!(
        lib_verify(Kind::Bundle, &proven.encode(), url, &contract),
        Outcome::Verified
    );

    // Case 4: no mutation of any byte of the honest bundle verifies.
    let mut rng = Rng::new(99);
    for _ in 0..150 {
        let mut b = honest_bytes.clone();
        let i = rng.below(b.len());
        b[i] ^= 1 + rng.below(255) as u8;
        assert_ne!(
            lib_verify(Kind::Bundle, &b, url, &contract),
            Outcome::Verified,
            "mutation at byte {i} verified"
        );
    }

    // Case 6: the text report escapes what the file says, whether the bundle verifies or is
    // tampered (a flipped byte in the inclusion proof of the event after the hostile one, so
    // the hostile one is opened first): the first line stays the verdict.
    let mut tampered = honest.clone();
    tampered.events[2].proof[0].0[0] ^= 1;
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("escape.bundle");
    for (bytes, want, verdict, failure) in [
        (honest_bytes, 0, "VERIFIED\n", None),
        (
            tampered.encode(),
            1,
            "TAMPERED\n",
            Some(": inclusion-proof ("),
        ),
    ] {
        std::fs::write(&f, bytes).unwrap();
        let (code, _, text) = verify_cli("bundle", &f, &pins(url, Some(&contract), ADDR, false));
        assert_eq!(code, want, "{text}");
        assert!(text.starts_with(verdict), "{text}");
        assert!(failure.is_none_or(|c| text.contains(c)), "{text}");
        assert!(!text.contains(['\u{1b}', '\r', '\u{202e}']), "{text:?}");
        assert!(text.contains("\\u{1b}[2K\\rVERIFIED \\u{202e}"), "{text}");
    }
}

#[test]
fn reads_hundreds_of_anchored_roots_in_batched_calls() {
    let chain = anvil();
    let url = chain.url.as_str();
    let contract = deploy(url);
    // 600 epochs, anchored in three batches: more than two JSON-RPC batches of receipts would
    // be needed if each were its own transaction; the logs come in one call.
    let mut h = History::random(&mut Rng::new(7), addr(ADDR));
    let base = h.epochs.clone();
    h.epochs = (0..900).map(|i| base[i % base.len()].clone()).collect();
    let log = h.seal();
    let roots = log.roots();
    for i in 0..3 {
        let list: Vec<String> = roots[i * 200..(i + 1) * 200].iter().map(hx).collect();
        let prev = if i == 0 {
            Hash32::ZERO
        } else {
            back_pointer(1, &roots[i * 200 - 1])
        };
        send(
            url,
            &[
                &contract,
                "anchorBatch(uint64,bytes32[],bytes32)",
                &(i * 200).to_string(),
                &format!("[{}]", list.join(",")),
                &hx(&prev),
            ],
        );
    }
    // And 300 more epochs one transaction each (sent from the unlocked dev account in one
    // JSON-RPC batch): more than one batch of receipts to read back.
    // Mined together in one block, as a busy recorder's backlog would be.
    cast(&["rpc", "evm_setAutomine", "false", "--rpc-url", url]);
    let nonce = cast(&["nonce", ADDR, "--rpc-url", url]);
    let nonce = nonce
        .as_u64()
        .unwrap_or_else(|| nonce.as_str().unwrap().parse().unwrap());
    let calls: Vec<serde_json::Value> = (600..900u64)
        .map(|e| {
            let data = format!(
                "0x7494b1af{:064x}{}{}",
                e,
                roots[e as usize],
                back_pointer(e, &roots[e as usize - 1])
            );
            serde_json::json!({"jsonrpc": "2.0", "id": e, "method": "eth_sendTransaction",
                "params": [{"from": ADDR, "to": contract, "data": data, "gas": "0x30000",
                    "nonce": format!("0x{:x}", nonce + e - 600)}]})
        })
        .collect();
    let answer: serde_json::Value = serde_json::from_str(
        &ureq::post(url)
            .header("content-type", "application/json")
            .send(&serde_json::Value::Array(calls).to_string())
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(answer.as_array().unwrap().len(), 300);
    let errors = answer
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a.get("error").is_some())
        .count();
    assert_eq!(errors, 0, "{errors} of 300 transactions refused");
    cast(&["rpc", "evm_mine", "--rpc-url", url]);
    cast(&["rpc", "evm_setAutomine", "true", "--rpc-url", url]);
    let last_tx = answer.as_array().unwrap()[299]["result"]
        .as_str()
        .unwrap()
        .to_owned();
    let receipt = cast(&["receipt", "--json", "--rpc-url", url, &last_tx]);
    assert_eq!(receipt["status"], "0x1", "{receipt}");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("log.afr");
    std::fs::write(&file, log.export()).unwrap();
    let (code, v, _) = verify_cli("log", &file, &pins(url, Some(&contract), ADDR, true));
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["checks"]["anchored-root"], 900);
}
