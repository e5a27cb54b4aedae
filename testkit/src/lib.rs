//! Test support shared by the integration tests of several crates: the pinned Foundry tools
//! (`scripts/install-tools.sh` puts them in `.tools/bin`), a local anvil on a free port that
//! stops when dropped, `cast`, and the seeded synthetic workload ([`synth`]). Tests and the
//! research harness only: every failure here panics with what went wrong.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test support fails loudly on purpose"
)]

pub mod synth;

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

/// Anvil's first dev account's key: test ether on throwaway local chains only.
pub const DEV_KEY: &str = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
/// Its address, lower case.
pub const DEV_ADDR: &str = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";

/// A pinned Foundry tool (`anvil`, `cast`, `forge`) from the workspace's `.tools/bin`.
pub fn tool(name: &str) -> PathBuf {
    installed(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../.tools/bin")
            .join(name),
        "scripts/install-tools.sh",
    )
}

/// `path`, which a project script installs; fails the test naming the script if it is missing.
pub fn installed(path: &std::path::Path, script: &str) -> PathBuf {
    assert!(path.exists(), "{} missing: run {script}", path.display());
    path.to_owned()
}

/// A running anvil, killed when dropped.
#[derive(Debug)]
pub struct Anvil {
    /// The process.
    pub child: Child,
    /// Its JSON-RPC URL.
    pub url: String,
}

impl Anvil {
    /// Kills it now (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        self.kill();
    }
}

/// An anvil on a port the system picks.
pub fn anvil() -> Anvil {
    anvil_on(0, &[])
}

/// An anvil on `port` (0: any free port) with extra flags (for example `--block-time 1`),
/// once it listens.
///
/// The address is read from anvil's own "Listening on" line, so a test never talks to another
/// test's node: probing a port that was merely free a moment ago races with parallel tests.
pub fn anvil_on(port: u16, extra: &[&str]) -> Anvil {
    use std::io::BufRead as _;
    let mut child = Command::new(tool("anvil"))
        .args(["--port", &port.to_string()])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // Reads the address, then keeps draining so a chatty node never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(addr) = line.trim().strip_prefix("Listening on ")
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(addr.trim().to_owned());
            }
        }
    });
    let Ok(addr) = rx.recv_timeout(Duration::from_secs(30)) else {
        let _ = child.kill();
        let status = child.wait();
        panic!("anvil did not start listening (port {port}): {status:?}");
    };
    Anvil {
        child,
        url: format!("http://{addr}"),
    }
}

/// `cast ARGS...`: its trimmed stdout; panics with its stderr if it fails.
pub fn cast(args: &[&str]) -> String {
    let out = Command::new(tool("cast")).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "cast {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// `cast ARGS... --rpc-url URL`.
pub fn cast_at(url: &str, args: &[&str]) -> String {
    let mut a = args.to_vec();
    a.extend(["--rpc-url", url]);
    cast(&a)
}

/// The `Anchored` events `contract` emitted for `recorder` on the chain at `url`, as
/// `(epoch, root)` sorted by epoch (root as `0x` + 64 hex digits), read with `cast logs`.
pub fn anchored_logs(url: &str, contract: &str, recorder: &str) -> Vec<(u64, String)> {
    let logs = cast_at(
        url,
        &[
            "logs",
            "--json",
            "--from-block",
            "0",
            "--address",
            contract,
            "Anchored(address indexed,uint64 indexed,bytes32,bytes32)",
            recorder,
        ],
    );
    let logs: Vec<serde_json::Value> = serde_json::from_str(&logs).unwrap();
    let mut out: Vec<(u64, String)> = logs
        .iter()
        .map(|l| {
            let e = l["topics"][2].as_str().unwrap().trim_start_matches("0x");
            let root = &l["data"].as_str().unwrap()[..66];
            (u64::from_str_radix(e, 16).unwrap(), root.to_owned())
        })
        .collect();
    out.sort();
    out
}

/// The signatures (`Name(type,...)`) of the ABI items of `kind` (`error`, `event`, ...) in a
/// contract artifact (Foundry's JSON output), in the artifact's order.
pub fn abi_signatures(artifact: &str, kind: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(artifact).unwrap();
    let types = |item: &serde_json::Value| -> Vec<String> {
        item["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["type"].as_str().unwrap().to_owned())
            .collect()
    };
    v["abi"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == kind)
        .map(|i| format!("{}({})", i["name"].as_str().unwrap(), types(i).join(",")))
        .collect()
}

/// A `shell` event calling `tool`, with nothing else filled in.
pub fn shell_event(tool: &str) -> afr_core::EventInput {
    let line = serde_json::json!({"category": "shell", "intent": {"tool": tool}}).to_string();
    afr_core::EventInput::from_json(line.as_bytes(), 1 << 20).unwrap()
}

/// Runs `c` and returns its output, failing the test with its exit status and stderr unless it
/// succeeded.
pub fn ok(c: &mut Command) -> std::process::Output {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
