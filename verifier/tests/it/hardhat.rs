//! `afr-verify` against a second Ethereum node implementation: Hardhat Network (EDR, installed
//! and pinned by scripts/setup.sh in tests/hardhat/). Its JSON-RPC serves neither raw
//! transactions nor block receipts, so the verifier rebuilds the transactions trie from the
//! block's transaction objects and the receipts trie from one receipt per transaction; its
//! headers must hash as anvil's do. Then the proof archive offline, and two honest nodes of two
//! different chains that both say chain 31337: they disagree, and nothing is verified.

use std::{
    io::BufRead as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use super::anvil::{ADDR, addr, anchor_batch, artifact, deploy, history, hx, send, verify_cli};

/// A running Hardhat node, killed when dropped.
struct Hardhat {
    child: Child,
    url: String,
}

impl Drop for Hardhat {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn hardhat_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/hardhat")
}

/// `hardhat node` on a free port, once it says it listens.
fn hardhat() -> Hardhat {
    let bin = hardhat_dir().join("node_modules/.bin/hardhat");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/setup.sh",
        bin.display()
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(&bin)
        .args([
            "node",
            "--hostname",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .current_dir(hardhat_dir())
        .env("HARDHAT_DISABLE_TELEMETRY_PROMPT", "true")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.contains("Started HTTP")
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(Duration::from_secs(60)).is_err() {
        let _ = child.kill();
        panic!("hardhat node did not start: {:?}", child.wait());
    }
    Hardhat {
        child,
        url: format!("http://127.0.0.1:{port}"),
    }
}

/// `cast send` with a gas limit: Hardhat refuses cast's gas estimation request (it carries
/// both `input` and `data`).
fn send_hh(url: &str, gas: &str, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["--gas-limit", gas];
    a.extend_from_slice(args);
    send(url, &a)
}

#[test]
fn a_second_node_implementation_proves_the_same_anchors() {
    let node = hardhat();
    let url = node.url.as_str();
    let contract = send_hh(url, "5000000", &["--create", &artifact("bytecode")])["contractAddress"]
        .as_str()
        .unwrap()
        .to_owned();
    let (mut h, _) = history(addr(ADDR), 3);
    let log = h.seal();
    let roots = log.roots();
    let list: Vec<String> = roots.iter().map(hx).collect();
    send_hh(
        url,
        "1000000",
        &[
            &contract,
            "anchorBatch(uint64,bytes32[],bytes32)",
            "0",
            &format!("[{}]", list.join(",")),
            &hx(&afr_core::Hash32::ZERO),
        ],
    );
    // A block with two other transactions, legacy and EIP-1559, beside nothing of ours.
    send_hh(
        url,
        "30000",
        &[
            "--legacy",
            "0x000000000000000000000000000000000000dEaD",
            "--value",
            "1",
        ],
    );
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("log.afr");
    std::fs::write(&file, log.export()).unwrap();
    let pins = [
        "--rpc",
        url,
        "--chain-id",
        "31337",
        "--contract",
        &contract,
        "--recorder",
        ADDR,
        "--json",
    ];
    let (code, v, text) = verify_cli("log", &file, &pins);
    assert_eq!(code, 0, "{text}");
    assert_eq!(v["checks"]["anchored-root"], roots.len(), "{v}");
    let headers = v["chain"]["headers"].as_object().unwrap().clone();
    assert_eq!(headers.len(), 1, "{v}");

    // The proof archive from Hardhat, checked offline once the node is gone.
    let archive = tmp.path().join("anchors.json");
    let mut a: Vec<&str> = vec!["anchors"];
    a.extend_from_slice(&pins[..pins.len() - 1]);
    a.extend(["--out", archive.to_str().unwrap()]);
    let a: Vec<std::ffi::OsString> = a.iter().map(std::ffi::OsString::from).collect();
    let a: Vec<&std::ffi::OsStr> = a.iter().map(|s| s.as_os_str()).collect();
    let (code, _, text) = super::anvil::run(&a);
    assert_eq!(code, 0, "{text}");

    // An anvil with the same deployment and the same roots anchored: another chain that also
    // says 31337. Each node alone proves the anchors; together they disagree on every block
    // hash, and under `all` nothing is verified.
    let other = afr_testkit::anvil();
    let c2 = deploy(&other.url);
    assert_eq!(
        c2, contract,
        "the same deployer and nonce give the same address"
    );
    anchor_batch(&other.url, &c2, &roots, 0);
    send(
        &other.url,
        &["0x000000000000000000000000000000000000dEaD", "--value", "1"],
    );
    let (code, v, text) = verify_cli(
        "log",
        &file,
        &[
            "--rpc",
            url,
            "--rpc",
            &other.url,
            "--chain-id",
            "31337",
            "--contract",
            &contract,
            "--recorder",
            ADDR,
            "--json",
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(v["checks"]["anchored-root"].is_null(), "{v}");
    assert!(
        v["chain"]["providers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["agreed"] == false && p["detail"].to_string().contains("hash")),
        "{v}"
    );
    drop(node);
    drop(other);
    let (code, v, text) = verify_cli(
        "log",
        &file,
        &[
            "--anchors",
            archive.to_str().unwrap(),
            "--chain-id",
            "31337",
            "--contract",
            &contract,
            "--recorder",
            ADDR,
            "--json",
        ],
    );
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        v["chain"]["headers"],
        serde_json::Value::Object(headers),
        "{v}"
    );
}
