//! `afr witness serve` over real HTTP: checkpoints of a log built here with afr-tlog (a log
//! key, a tree of fake epoch roots) submitted to the running binary, every refusal of the
//! spec (c2sp.org/tlog-witness), the monitoring endpoint, state across a kill and restart,
//! and concurrent submissions that must never roll the head back.

use std::{
    collections::HashSet,
    io::{Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::Command,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use afr_core::{Hash32, hash::sha256};
use afr_tlog::{
    Checkpoint, Note, NoteSigner, Policy,
    note::{TYPE_COSIGNATURE, TYPE_ED25519},
    tree,
    witness::{AddCheckpoint, MAX_REQUEST, SIZE_CONTENT_TYPE},
};
use zeroize::Zeroizing;

use super::proc::Daemon;

/// The command that runs the witness.
const SERVE: &[&str] = &["witness", "serve"];
const NAME: &str = "witness.test/w1";
const ORIGIN: &str = "afr.recorder/0x1111111111111111111111111111111111111111";
const TEXT: &str = "text/plain; charset=utf-8";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A log: its key and a tree of fake epoch roots.
struct Log {
    signer: NoteSigner,
    leaves: Vec<Hash32>,
}

impl Log {
    fn new(origin: &str, key_seed: u8, n: u64, salt: &str) -> Log {
        let signer =
            NoteSigner::new(origin, TYPE_ED25519, &Zeroizing::new([key_seed; 32])).unwrap();
        let roots: Vec<Hash32> = (0..n)
            .map(|i| sha256(&[salt.as_bytes(), &i.to_be_bytes()]))
            .collect();
        Log {
            signer,
            leaves: tree::leaves(&roots),
        }
    }

    fn vkey(&self) -> String {
        self.signer.verifier().to_string()
    }

    /// The signed checkpoint of the first `n` leaves.
    fn checkpoint(&self, n: u64) -> String {
        let text = Checkpoint {
            origin: self.signer.verifier().name.clone(),
            size: n,
            root: tree::root(&self.leaves[..n as usize]),
            extensions: vec![],
        }
        .text();
        Note {
            signatures: vec![self.signer.sign(&text)],
            text,
        }
        .to_text()
    }

    /// An add-checkpoint body from `old` to `n`, with its consistency proof.
    fn request(&self, old: u64, n: u64) -> String {
        let proof = if old == 0 {
            vec![]
        } else {
            tree::consistency_proof(&self.leaves, old, n).unwrap()
        };
        AddCheckpoint {
            old,
            proof,
            checkpoint: self.checkpoint(n),
        }
        .body()
    }
}

/// An HTTP answer.
#[derive(Debug)]
struct Answer {
    status: u16,
    content_type: String,
    body: String,
}

fn http(addr: &str, method: &str, path: &str, body: &[u8]) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    // The server may answer (413) before reading a large body, and close.
    let _ = s.write_all(body);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_default();
    Answer {
        status,
        content_type,
        body: body.to_owned(),
    }
}

fn post(addr: &str, body: &str) -> Answer {
    http(addr, "POST", "/add-checkpoint", body.as_bytes())
}

/// A witness's files: its key and state in a temporary directory.
struct Setup {
    _tmp: tempfile::TempDir,
    key: PathBuf,
    state: PathBuf,
    logs_file: PathBuf,
}

impl Setup {
    fn new(log_lines: &str) -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let logs_file = tmp.path().join("logs.txt");
        std::fs::write(&logs_file, log_lines).unwrap();
        Setup {
            key: tmp.path().join("witness.key"),
            state: tmp.path().join("state"),
            logs_file,
            _tmp: tmp,
        }
    }

    fn command(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_afr"));
        c.args(SERVE)
            .arg("--key")
            .arg(&self.key)
            .args(["--init", "--name", NAME]);
        c
    }

    fn vkey(&self) -> String {
        let out = afr_testkit::ok(self.command().arg("--print-vkey"));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// Starts the witness on a free loopback port: the process and its address.
    fn start(&self, extra: &[&str]) -> (Daemon, String) {
        let mut d = Daemon::spawn(
            self.command()
                .arg("--logs")
                .arg(&self.logs_file)
                .arg("--state")
                .arg(&self.state)
                .args(["--listen", "127.0.0.1:0"])
                .args(extra),
        );
        let addr = d
            .wait_for(|l| l.split("listening on http://").nth(1).map(str::to_owned))
            .unwrap_or_else(|| panic!("the witness did not start: {}", d.stderr()));
        (d, addr)
    }
}

fn policy(log: &Log, witness_vkey: &str) -> Policy {
    Policy::parse(&format!(
        "log {}\nwitness w1 {witness_vkey}\nquorum w1\n",
        log.vkey()
    ))
    .unwrap()
}

/// The checkpoint with the witness's answer appended, checked against a policy requiring it.
fn cosigned(note: &str, answer: &Answer, log: &Log, witness_vkey: &str) -> (u64, u64) {
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.content_type, TEXT);
    assert!(
        answer.body.starts_with(&format!("\u{2014} {NAME} ")) && answer.body.ends_with('\n'),
        "{answer:?}"
    );
    let full = format!("{note}{}", answer.body);
    let c = afr_tlog::check_checkpoint(full.as_bytes(), &policy(log, witness_vkey), ORIGIN, now())
        .unwrap();
    assert!(c.quorum_met, "{c:?}");
    (c.checkpoint.size, c.cosigned[0].1)
}

fn hash_path(origin: &str) -> String {
    format!("/{}/checkpoint", sha256(&[origin.as_bytes()]).to_hex())
}

fn state_file(state: &Path, origin: &str, file: &str) -> PathBuf {
    state.join(sha256(&[origin.as_bytes()]).to_hex()).join(file)
}

#[test]
fn witness_cosigns_consistent_checkpoints_and_refuses_everything_else() {
    let log = Log::new(ORIGIN, 7, 12, "epoch");
    let other = Log::new("other.example/log", 8, 4, "other");
    let setup = Setup::new(&format!(
        "# the logs this witness accepts\n{}\n\n{}   # a second log\n",
        log.vkey(),
        other.vkey()
    ));
    let wvkey = setup.vkey();
    assert!(wvkey.starts_with(&format!("{NAME}+")), "{wvkey}");
    let (_d, addr) = setup.start(&[]);
    let a = addr.as_str();

    // Nothing cosigned yet.
    assert_eq!(http(a, "GET", &hash_path(ORIGIN), b"").status, 404);

    // First contact: old 0, no proof.
    let before = now();
    let (size, ts) = cosigned(
        &log.checkpoint(3),
        &post(a, &log.request(0, 3)),
        &log,
        &wvkey,
    );
    assert_eq!(size, 3);
    assert!(ts >= before && ts <= now(), "timestamp {ts}");

    // A client that believes the witness has nothing: 409 with the size it holds.
    let r = post(a, &log.request(0, 5));
    assert_eq!(
        (r.status, r.content_type.as_str(), r.body.as_str()),
        (409, SIZE_CONTENT_TYPE, "3\n")
    );

    // The consistent extension.
    let (size, _) = cosigned(
        &log.checkpoint(5),
        &post(a, &log.request(3, 5)),
        &log,
        &wvkey,
    );
    assert_eq!(size, 5);

    // A stale old size (a smaller checkpoint than the one cosigned): 409, "5".
    let r = post(a, &log.request(3, 4));
    assert_eq!(
        (r.status, r.content_type.as_str(), r.body.as_str()),
        (409, SIZE_CONTENT_TYPE, "5\n")
    );

    // A fork: the same log key signs a tree whose epoch 4 differs.
    let mut fork = Log::new(ORIGIN, 7, 12, "epoch");
    fork.leaves[4] = tree::leaf(&sha256(&[b"rewritten"]));
    let r = post(a, &fork.request(5, 7));
    assert_eq!(r.status, 422, "{r:?}");
    assert_eq!(r.content_type, TEXT);
    // The same size with another root.
    let same_size = AddCheckpoint {
        old: 5,
        proof: vec![],
        checkpoint: fork.checkpoint(5),
    };
    assert_eq!(post(a, &same_size.body()).status, 422);
    // Old size 0 with a proof.
    let bad_proof = AddCheckpoint {
        old: 0,
        proof: vec![log.leaves[0]],
        checkpoint: log.checkpoint(2),
    };
    assert_eq!(post(a, &bad_proof.body()).status, 409); // old 0 is not 5: 409 comes first

    // An untrusted key under the log's name: 403. An unknown origin: 404.
    let impostor = Log::new(ORIGIN, 9, 12, "epoch");
    assert_eq!(post(a, &impostor.request(5, 7)).status, 403);
    let unknown = Log::new("unknown.example/log", 10, 3, "u");
    assert_eq!(post(a, &unknown.request(0, 2)).status, 404);

    // Garbage, an old size above the size, an oversized body.
    assert_eq!(post(a, "garbage").status, 400);
    assert_eq!(
        post(a, &log.request(0, 5).replacen("old 0", "old 9", 1)).status,
        400
    );
    assert_eq!(post(a, &"x".repeat(MAX_REQUEST + 1)).status, 413);

    // Nothing refused moved the head: the consistent next step still works.
    let (size, _) = cosigned(
        &log.checkpoint(8),
        &post(a, &log.request(5, 8)),
        &log,
        &wvkey,
    );
    assert_eq!(size, 8);

    // The monitoring endpoint: the log's signature and the witness's cosignature.
    let g = http(a, "GET", &hash_path(ORIGIN), b"");
    assert_eq!((g.status, g.content_type.as_str()), (200, TEXT));
    let c = afr_tlog::check_checkpoint(g.body.as_bytes(), &policy(&log, &wvkey), ORIGIN, now())
        .unwrap();
    assert_eq!(c.checkpoint.size, 8);
    assert!(c.quorum_met);
    assert_eq!(
        http(a, "GET", &hash_path(ORIGIN).to_uppercase(), b"").status,
        404
    );
    assert_eq!(
        http(a, "GET", &hash_path("unknown.example/log"), b"").status,
        404
    );
    assert_eq!(http(a, "POST", &hash_path(ORIGIN), b"").status, 405);
    assert_eq!(http(a, "GET", "/add-checkpoint", b"").status, 405);
    assert_eq!(http(a, "GET", "/", b"").status, 404);

    // The second log, from the same --logs file, has its own head.
    let (size, _) = cosigned_other(&other, &post(a, &other.request(0, 4)), &wvkey);
    assert_eq!(size, 4);

    // The evidence file: the validly signed refusals (409s, forks, old above size), each with
    // the request verbatim; the impostor's and the garbage are not in it.
    let refused = std::fs::read_to_string(state_file(&setup.state, ORIGIN, "refused.log")).unwrap();
    let entries: Vec<serde_json::Value> = refused
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let statuses: Vec<u64> = entries
        .iter()
        .map(|e| e["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [409, 409, 422, 422, 409, 400], "{refused}");
    assert_eq!(entries[2]["request"], fork.request(5, 7));
    assert!(
        entries[2]["reason"]
            .as_str()
            .unwrap()
            .contains("not consistent"),
        "{refused}"
    );
    assert!(
        entries
            .iter()
            .all(|e| e["time"].as_u64().unwrap() >= before)
    );
}

fn cosigned_other(other: &Log, answer: &Answer, wvkey: &str) -> (u64, u64) {
    assert_eq!(answer.status, 200, "{answer:?}");
    let full = format!("{}{}", other.checkpoint(4), answer.body);
    let c = afr_tlog::check_checkpoint(
        full.as_bytes(),
        &policy(other, wvkey),
        "other.example/log",
        now(),
    )
    .unwrap();
    assert!(c.quorum_met);
    (c.checkpoint.size, c.cosigned[0].1)
}

#[test]
fn witness_state_survives_a_kill_and_restart() {
    let log = Log::new(ORIGIN, 7, 10, "epoch");
    let setup = Setup::new(&log.vkey());
    let wvkey = setup.vkey();
    let (mut d, addr) = setup.start(&[]);
    cosigned(
        &log.checkpoint(6),
        &post(&addr, &log.request(0, 6)),
        &log,
        &wvkey,
    );

    // A second witness on the same state directory is refused while the first serves.
    let out = setup
        .command()
        .arg("--logs")
        .arg(&setup.logs_file)
        .arg("--state")
        .arg(&setup.state)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(74));
    assert!(String::from_utf8_lossy(&out.stderr).contains("another witness"));

    // SIGKILL: nothing but what was on disk before the 200 survives.
    d.guard.0.kill().unwrap();
    d.guard.0.wait().unwrap();
    let (_d, addr) = setup.start(&[]);
    assert_eq!(setup.vkey(), wvkey, "the key file is kept");
    let r = post(&addr, &log.request(0, 8));
    assert_eq!((r.status, r.body.as_str()), (409, "6\n"));
    let r = post(&addr, &log.request(4, 8));
    assert_eq!((r.status, r.body.as_str()), (409, "6\n"));
    cosigned(
        &log.checkpoint(8),
        &post(&addr, &log.request(6, 8)),
        &log,
        &wvkey,
    );
    let g = http(&addr, "GET", &hash_path(ORIGIN), b"");
    assert!(g.body.starts_with(&format!("{ORIGIN}\n8\n")), "{g:?}");
}

#[test]
fn witness_refuses_remote_addresses_and_other_key_types() {
    let log = Log::new(ORIGIN, 7, 2, "epoch");
    let setup = Setup::new(&log.vkey());
    let base = || {
        let mut c = setup.command();
        c.arg("--state").arg(&setup.state);
        c
    };
    let out = base()
        .args(["--log", &log.vkey(), "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-remote"));
    // A cosigner's key is not a log key.
    let cosigner = NoteSigner::new(ORIGIN, TYPE_COSIGNATURE, &Zeroizing::new([3; 32])).unwrap();
    let out = base()
        .args(["--log", &cosigner.verifier().to_string()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let out = base().output().unwrap();
    assert_eq!(out.status.code(), Some(64), "no log at all");
}

/// Eight clients race to push the head to sizes of their choosing. Every accepted request
/// must have had the head's size as its old size, so the accepted (old, new) pairs form one
/// chain from 0, and the head a monitor reads never shrinks.
#[test]
fn concurrent_submissions_never_roll_back() {
    const N: u64 = 200;
    let log = Arc::new(Log::new(ORIGIN, 7, N, "epoch"));
    let setup = Setup::new(&log.vkey());
    let (_d, addr) = setup.start(&[]);
    let addr = Arc::new(addr);
    let done = Arc::new(AtomicBool::new(false));
    let monitor = {
        let (addr, done) = (addr.clone(), done.clone());
        std::thread::spawn(move || {
            let mut last = 0u64;
            let mut reads = 0;
            while !done.load(Ordering::Relaxed) {
                let g = http(&addr, "GET", &hash_path(ORIGIN), b"");
                if g.status == 200 {
                    let size: u64 = g.body.lines().nth(1).unwrap().parse().unwrap();
                    assert!(size >= last, "the head went from {last} back to {size}");
                    last = size;
                    reads += 1;
                }
            }
            reads
        })
    };
    let clients: Vec<_> = (0..8u64)
        .map(|c| {
            let (log, addr) = (log.clone(), addr.clone());
            std::thread::spawn(move || {
                let mut accepted = Vec::new();
                let mut believed = 0u64;
                let mut x = c.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                for _ in 0..40 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let target = believed + 1 + x % 4;
                    if target > N {
                        break;
                    }
                    let r = post(&addr, &log.request(believed, target));
                    match r.status {
                        200 => {
                            accepted.push((believed, target));
                            believed = target;
                        }
                        409 => believed = r.body.trim().parse().unwrap(),
                        s => panic!("client {c}: {s} {}", r.body),
                    }
                }
                accepted
            })
        })
        .collect();
    let mut accepted: Vec<(u64, u64)> = clients
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    done.store(true, Ordering::Relaxed);
    assert!(monitor.join().unwrap() > 0);
    accepted.sort();
    let olds: HashSet<u64> = accepted.iter().map(|(o, _)| *o).collect();
    assert_eq!(
        olds.len(),
        accepted.len(),
        "two requests accepted from one old size: {accepted:?}"
    );
    let mut at = 0;
    for (old, new) in &accepted {
        assert_eq!(
            *old, at,
            "the accepted requests are not one chain: {accepted:?}"
        );
        at = *new;
    }
    assert!(accepted.len() > 8, "{accepted:?}");
    let g = http(&addr, "GET", &hash_path(ORIGIN), b"");
    assert!(g.body.starts_with(&format!("{ORIGIN}\n{at}\n")), "{g:?}");
}
