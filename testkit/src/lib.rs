//! Test support shared by the integration tests of several crates: the pinned Foundry tools
//! (`scripts/install-tools.sh` puts them in `.tools/bin`), a local anvil on a free port that
//! stops when dropped, and `cast`. Tests only: every failure panics with what went wrong.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test support fails loudly on purpose"
)]

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// Anvil's first dev account's key: test ether on throwaway local chains only.
pub const DEV_KEY: &str = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
/// Its address, lower case.
pub const DEV_ADDR: &str = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";

/// A pinned Foundry tool (`anvil`, `cast`, `forge`) from the workspace's `.tools/bin`.
pub fn tool(name: &str) -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../.tools/bin")
        .join(name);
    assert!(
        bin.exists(),
        "{} missing: run scripts/install-tools.sh",
        bin.display()
    );
    bin
}

/// A TCP port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
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

/// An anvil on a free port.
pub fn anvil() -> Anvil {
    anvil_on(free_port(), &[])
}

/// An anvil on `port` with extra flags (for example `--block-time 1`), once it listens.
pub fn anvil_on(port: u16, extra: &[&str]) -> Anvil {
    let child = Command::new(tool("anvil"))
        .args(["--port", &port.to_string(), "--silent"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "anvil did not start on port {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Anvil {
        child,
        url: format!("http://127.0.0.1:{port}"),
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
