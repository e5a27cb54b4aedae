//! `afr bench witness`: what the independent roots of issue #32 cost per sealed epoch, on a
//! real store, against two real `afr witness serve` processes on loopback, in one run.
//!
//! ```text
//! record E epochs (RocksDB) ─▶ (a) per size n = 1..E: read the n sealed headers, tree root
//!                                  over the epoch roots, sign the checkpoint, PROOF(n-1, n)
//!                             ─▶ (b) per n: POST add-checkpoint to witness 1, then 2, each
//!                                  cosignature verified under its pinned key
//!                             ─▶ (c) each witness's CPU (utime + stime) over (b), per cosignature
//!                             ─▶ (d) per checkpoint: an RFC 3161 token from `openssl ts -reply`
//!                                  behind tests/tsa/tsa_shim.py (skipped without them)
//!                             ─▶ (e) K more epochs, each followed by a real `afr witness` pass
//!                                  (a process: open the store read-only, sign, submit to both)
//! ```
//!
//! Stage (a) is what `afr witness` computes per pass (it reads every header and rebuilds the
//! tree: linear in the number of epochs); (b) is what it waits for; (e) is the whole pass as
//! an operator runs it. The figures feed the window/cost table of docs/gas.md.

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, ExitCode, Stdio},
    time::{Duration, Instant},
};

use afr_core::{EpochHeader, hash::sha256};
use afr_recorder::{Config, Recorder, roots::Roots};
use afr_tlog::{Checkpoint, Note, VerifierKey, tree, witness::AddCheckpoint};
use anyhow::{Context, Result, bail, ensure};
use clap::Args;
use serde::Serialize;
use serde_json::json;

use crate::bench::percentile;

/// Options of `afr bench witness`.
#[derive(Args, Debug)]
pub struct WitnessBench {
    /// Sealed epochs (one checkpoint each).
    #[arg(long, default_value_t = 1000)]
    epochs: u64,
    /// Events per epoch.
    #[arg(long, default_value_t = 100)]
    epoch_size: u64,
    /// Real `afr witness` passes at the end, each after one more sealed epoch.
    #[arg(long, default_value_t = 20)]
    passes: u64,
    /// RFC 3161 round trips (0: none); skipped when openssl, python3 or the shim is missing.
    #[arg(long, default_value_t = 50)]
    tsa: u64,
    /// The `afr` program (default: the one beside this program).
    #[arg(long)]
    afr: Option<PathBuf>,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

/// Median and P99 of one measured step, in microseconds.
#[derive(Debug, Clone, Copy, Serialize)]
struct Stat {
    median_us: f64,
    p99_us: f64,
    /// At the largest size measured (the mean of its last 10 samples).
    last_us: f64,
}

fn stat(us: &[f64]) -> Stat {
    let tail = &us[us.len().saturating_sub(10)..];
    let last = if tail.is_empty() {
        0.0
    } else {
        tail.iter().sum::<f64>() / tail.len() as f64
    };
    let mut s = us.to_vec();
    s.sort_by(f64::total_cmp);
    let r = |x: f64| (x * 10.0).round() / 10.0;
    Stat {
        median_us: r(percentile(&s, 0.5)),
        p99_us: r(percentile(&s, 0.99)),
        last_us: r(last),
    }
}

fn us(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

/// Clock ticks per second of /proc/<pid>/stat (`getconf CLK_TCK`; Linux reports USER_HZ,
/// 100, on every architecture it runs on).
fn clk_tck() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// User plus system CPU seconds of process `pid` (all its threads), from /proc/<pid>/stat.
fn cpu_seconds(pid: u32, tck: f64) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = s.rsplit_once(") ")?.1;
    let f: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / tck)
}

/// A running `afr witness serve`.
struct WitnessProc {
    name: String,
    child: Child,
    url: String,
    key: VerifierKey,
}

impl WitnessProc {
    fn start(afr: &Path, tmp: &Path, name: &str, log_vkey: &str) -> Result<WitnessProc> {
        let key = tmp.join(format!("{name}.key"));
        let key_name = format!("witness.bench/{name}");
        let base = |c: &mut Command| {
            c.args(["witness", "serve", "--key"])
                .arg(&key)
                .args(["--init", "--name", &key_name]);
        };
        let mut c = Command::new(afr);
        base(&mut c);
        let out = c.arg("--print-vkey").output()?;
        ensure!(
            out.status.success(),
            "afr witness serve --print-vkey: {}",
            crate::esc(String::from_utf8_lossy(&out.stderr).trim())
        );
        let vkey = String::from_utf8(out.stdout)?;
        let key = VerifierKey::parse(vkey.trim()).context("the witness's vkey")?;
        let mut c = Command::new(afr);
        base(&mut c);
        let mut child = c
            .args(["--log", log_vkey, "--state"])
            .arg(tmp.join(format!("{name}-state")))
            .args(["--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {} witness serve", afr.display()))?;
        let stderr = child.stderr.take().context("no stderr")?;
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads the witness's log to its end, so it never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(a) = line.split("listening on http://").nth(1) {
                    let _ = tx.send(a.trim().to_owned());
                }
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(20))
            .context("afr witness serve did not start listening within 20 s")?;
        Ok(WitnessProc {
            name: name.to_owned(),
            child,
            url: format!("http://{addr}"),
            key,
        })
    }
}

impl Drop for WitnessProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The shim of tests/tsa/ with a CA and a TSA certificate made here by openssl.
struct TsaShim {
    url: String,
    child: Child,
    _stdin: ChildStdin,
}

impl Drop for TsaShim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn openssl(dir: &Path, args: &[&str]) -> Result<()> {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()?;
    ensure!(
        out.status.success(),
        "openssl {}: {}",
        args.first().copied().unwrap_or(""),
        crate::esc(String::from_utf8_lossy(&out.stderr).trim())
    );
    Ok(())
}

/// Starts the TSA shim, or says why it cannot.
fn tsa_shim(dir: &Path) -> Result<TsaShim> {
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/tsa/tsa_shim.py");
    ensure!(shim.is_file(), "no {}", shim.display());
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join("ext.cnf"),
        "[ ca ]\nbasicConstraints = critical, CA:true\nkeyUsage = critical, keyCertSign\n\
         subjectKeyIdentifier = hash\n[ tsa ]\nbasicConstraints = critical, CA:false\n\
         keyUsage = critical, digitalSignature, nonRepudiation\n\
         extendedKeyUsage = critical, timeStamping\nsubjectKeyIdentifier = hash\n\
         authorityKeyIdentifier = keyid\n",
    )?;
    let ec = [
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
    ];
    openssl(dir, &[&ec[..], &["-out", "ca.key"]].concat())?;
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-x509",
            "-key",
            "ca.key",
            "-subj",
            "/O=AFR bench/CN=bench CA",
            "-days",
            "30",
            "-sha256",
            "-config",
            "ext.cnf",
            "-extensions",
            "ca",
            "-out",
            "ca.pem",
        ],
    )?;
    openssl(dir, &[&ec[..], &["-out", "tsa.key"]].concat())?;
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-key",
            "tsa.key",
            "-subj",
            "/O=AFR bench/CN=bench TSA",
            "-config",
            "ext.cnf",
            "-out",
            "tsa.csr",
        ],
    )?;
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "tsa.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "30",
            "-sha256",
            "-extfile",
            "ext.cnf",
            "-extensions",
            "tsa",
            "-out",
            "tsa.pem",
        ],
    )?;
    std::fs::write(
        dir.join("ts.cnf"),
        "[ tsa ]\nserial = ./tsa.serial\ncrypto_device = builtin\nsigner_cert = ./tsa.pem\n\
         signer_key = ./tsa.key\nsigner_digest = sha256\ndefault_policy = 1.3.6.1.4.1.99999.2.1\n\
         digests = sha256\naccuracy = secs:1\ntsa_name = yes\ness_cert_id_alg = sha256\n",
    )?;
    std::fs::write(dir.join("tsa.serial"), "01\n")?;
    let mut child = Command::new("python3")
        .arg(&shim)
        .arg("ts.cnf")
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot run python3")?;
    let stdin = child.stdin.take().context("no stdin")?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("no stdout")?).read_line(&mut line)?;
    let base = line
        .trim()
        .strip_prefix("listening ")
        .with_context(|| format!("the shim printed {:?}", line.trim()))?
        .to_owned();
    Ok(TsaShim {
        url: format!("{base}/tsa"),
        child,
        _stdin: stdin,
    })
}

/// Runs `afr bench witness` and prints its figures.
pub fn run(b: &WitnessBench) -> Result<ExitCode> {
    ensure!(b.epochs >= 2, "--epochs must be at least 2");
    let afr = match &b.afr {
        Some(p) => p.clone(),
        None => crate::serve_bench::afr_beside()?,
    };
    let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
    let dir = tmp.path().join("rec");
    afr_recorder::init(&dir, [0x42; 20])?;
    let rec = Recorder::open(&dir, Config::buffered(b.epoch_size.max(1)))?;
    let t = Instant::now();
    let mut events = crate::synth::generate((b.epochs + b.passes) * b.epoch_size, 7).into_iter();
    for ev in events.by_ref().take((b.epochs * b.epoch_size) as usize) {
        rec.submit(ev)?;
    }
    rec.flush()?;
    let record_s = t.elapsed().as_secs_f64();
    let store = rec.store();

    // (a) What a pass of `afr witness` computes for size n.
    let roots = Roots::open(&dir, true)?;
    let recorder = rec.recorder_id();
    let signer = roots.log_signer(&recorder)?;
    let origin = afr_recorder::roots::origin(&recorder);
    let (mut read, mut root_us, mut sign, mut proof_us) = (vec![], vec![], vec![], vec![]);
    let mut all_roots = Vec::new();
    for item in store.epochs_from(0)? {
        all_roots.push(EpochHeader::decode(&item?.1)?.root());
    }
    ensure!(
        all_roots.len() as u64 == b.epochs,
        "the store sealed {} epochs, not {}",
        all_roots.len(),
        b.epochs
    );
    let all_leaves = tree::leaves(&all_roots);
    let mut notes = Vec::with_capacity(b.epochs as usize);
    let mut proofs = Vec::with_capacity(b.epochs as usize);
    for n in 1..=b.epochs {
        let t = Instant::now();
        let mut roots_n = Vec::with_capacity(n as usize);
        for item in store.epochs_from(0)?.take(n as usize) {
            roots_n.push(EpochHeader::decode(&item?.1)?.root());
        }
        read.push(us(t));
        let t = Instant::now();
        let leaves = tree::leaves(&roots_n);
        let root = tree::root(&leaves);
        root_us.push(us(t));
        let t = Instant::now();
        let cp = Checkpoint {
            origin: origin.clone(),
            size: n,
            root,
            extensions: vec![],
        };
        let text = cp.text();
        let note = Note {
            signatures: vec![signer.sign(&text)],
            text,
        };
        let note_text = note.to_text();
        sign.push(us(t));
        let t = Instant::now();
        let p = tree::consistency_proof(&leaves, n - 1, n).context("no consistency proof")?;
        proof_us.push(us(t));
        notes.push((note, note_text));
        proofs.push(p);
    }
    ensure!(
        notes.last().map(|(n, _)| n.text.clone())
            == Some(
                Checkpoint {
                    origin: origin.clone(),
                    size: b.epochs,
                    root: tree::root(&all_leaves),
                    extensions: vec![],
                }
                .text()
            ),
        "the checkpoint built per pass is not the tree of the store's epochs"
    );

    // (b) Two real witnesses, each POST answered after the witness's head is fsynced.
    let log_vkey = signer.verifier().to_string();
    let ws = [
        WitnessProc::start(&afr, tmp.path(), "w1", &log_vkey)?,
        WitnessProc::start(&afr, tmp.path(), "w2", &log_vkey)?,
    ];
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(20)))
        .http_status_as_error(false)
        .build()
        .into();
    let tck = clk_tck();
    let cpu0: Vec<Option<f64>> = ws.iter().map(|w| cpu_seconds(w.child.id(), tck)).collect();
    let mut rt: [Vec<f64>; 2] = [vec![], vec![]];
    let (mut both, mut verify) = (vec![], vec![]);
    let t_all = Instant::now();
    for (i, ((note, text), proof)) in notes.iter().zip(&proofs).enumerate() {
        let n = i as u64 + 1;
        let body = AddCheckpoint {
            old: n - 1,
            proof: proof.clone(),
            checkpoint: text.clone(),
        }
        .body();
        let t_both = Instant::now();
        for (j, w) in ws.iter().enumerate() {
            let t = Instant::now();
            let mut resp = agent
                .post(&format!("{}/add-checkpoint", w.url))
                .header("Content-Type", "text/plain")
                .send(body.as_bytes())
                .map_err(|e| anyhow::anyhow!("witness {}: {e}", w.name))?;
            let status = resp.status().as_u16();
            let answer = resp
                .body_mut()
                .with_config()
                .limit(64 * 1024)
                .read_to_string()
                .unwrap_or_default();
            rt[j].push(us(t));
            if status != 200 {
                bail!(
                    "witness {} answered {status} at size {n}: {}",
                    w.name,
                    crate::esc(answer.trim())
                );
            }
            let t = Instant::now();
            let joined = format!("{}\n{answer}", note.text);
            let cosigned = Note::parse(joined.as_bytes()).context("the witness's answer")?;
            let ok = cosigned.verify(std::slice::from_ref(&w.key))?;
            verify.push(us(t));
            ensure!(
                ok.len() == 1,
                "witness {}: no cosignature at size {n}",
                w.name
            );
        }
        both.push(us(t_both));
    }
    let wall_b = t_all.elapsed().as_secs_f64();
    let cpu: Vec<Option<f64>> = ws
        .iter()
        .zip(&cpu0)
        .map(|(w, c0)| Some(cpu_seconds(w.child.id(), tck)? - (*c0)?))
        .collect();
    let cpu_per_cosig_us: Vec<Option<f64>> = cpu
        .iter()
        .map(|c| c.map(|s| (s * 1e6 / b.epochs as f64 * 10.0).round() / 10.0))
        .collect();

    // (d) RFC 3161 round trips, when the shim can run.
    let (tsa, tsa_skipped) = if b.tsa == 0 {
        (None, Some("--tsa 0".to_owned()))
    } else {
        match tsa_shim(&tmp.path().join("tsa")) {
            Ok(shim) => {
                let client = afr_tsa::Client::new(Duration::from_secs(30));
                let mut v = Vec::new();
                for (note, _) in notes.iter().rev().take(b.tsa as usize) {
                    let digest = sha256(&[note.text.as_bytes()]);
                    let t = Instant::now();
                    client
                        .timestamp(&shim.url, &digest.0)
                        .map_err(|e| anyhow::anyhow!("tsa: {e}"))?;
                    v.push(us(t));
                }
                (Some(stat(&v)), None)
            }
            Err(e) => (None, Some(format!("{e:#}"))),
        }
    };

    // (e) Real `afr witness` passes, each after one more sealed epoch.
    for w in &ws {
        roots.set_witness_size(&w.name, b.epochs)?;
    }
    roots.save(&notes[notes.len() - 1].0)?;
    let policy = tmp.path().join("witnesses.policy");
    let mut ptext = String::new();
    for w in &ws {
        ptext += &format!("witness {} {} {}\n", w.name, w.key, w.url);
    }
    ptext += "group both all w1 w2\nquorum both\n";
    std::fs::write(&policy, ptext)?;
    let mut pass = Vec::new();
    for k in 1..=b.passes {
        for ev in events.by_ref().take(b.epoch_size as usize) {
            rec.submit(ev)?;
        }
        rec.flush()?;
        let t = Instant::now();
        let out = Command::new(&afr)
            .arg("--dir")
            .arg(&dir)
            .args(["witness", "--policy"])
            .arg(&policy)
            .output()?;
        pass.push(us(t));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let size = b.epochs + k;
        ensure!(
            out.status.success()
                && ws
                    .iter()
                    .all(|w| stdout.contains(&format!("witness {} cosigned size {size}", w.name))),
            "afr witness pass {k}: {}{}",
            crate::esc(stdout.trim()),
            crate::esc(String::from_utf8_lossy(&out.stderr).trim())
        );
    }
    drop(ws);

    let (read, root_s, sign, proof_s) = (stat(&read), stat(&root_us), stat(&sign), stat(&proof_us));
    let (rt1, rt2, both_s, verify_s) = (stat(&rt[0]), stat(&rt[1]), stat(&both), stat(&verify));
    let pass_s = (!pass.is_empty()).then(|| stat(&pass));
    if b.json {
        println!(
            "{}",
            json!({
                "epochs": b.epochs,
                "epoch_size": b.epoch_size,
                "record_s": (record_s * 100.0).round() / 100.0,
                "checkpoint": {
                    "read_headers": read, "tree_root": root_s, "sign": sign,
                    "consistency_proof": proof_s,
                },
                "witness_round_trip": { "w1": rt1, "w2": rt2, "both_in_turn": both_s,
                    "verify_cosignature": verify_s,
                    "cosignatures_per_s": (2.0 * b.epochs as f64 / wall_b).round() },
                "witness_cpu_per_cosignature_us": { "w1": cpu_per_cosig_us[0], "w2": cpu_per_cosig_us[1] },
                "tsa_round_trip": tsa,
                "tsa_skipped": tsa_skipped,
                "afr_witness_pass": pass_s,
                "passes": b.passes,
            })
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "afr bench witness: {} sealed epochs of {} events (RocksDB, recorded in {record_s:.1} s), \
         checkpoint per size 1..{}; two afr witness serve on loopback",
        b.epochs, b.epoch_size, b.epochs
    );
    let row = |name: &str, s: &Stat| {
        println!(
            "  {name:<40} median {:>9.1} µs  p99 {:>9.1} µs  at size {}: {:>9.1} µs",
            s.median_us, s.p99_us, b.epochs, s.last_us
        );
    };
    let row_ms = |name: &str, s: &Stat| {
        println!(
            "  {name:<40} median {:>9.2} ms  p99 {:>9.2} ms",
            s.median_us / 1e3,
            s.p99_us / 1e3
        );
    };
    println!(" (a) building the checkpoint, per epoch");
    row("read the sealed headers (RocksDB)", &read);
    row("tree root over the epoch roots", &root_s);
    row("sign the checkpoint (Ed25519 note)", &sign);
    row("consistency proof n-1 -> n", &proof_s);
    println!(" (b) witness round trip, per epoch (POST add-checkpoint, fsync, cosignature)");
    row("witness w1", &rt1);
    row("witness w2", &rt2);
    row("both, one after the other", &both_s);
    row("verify a cosignature", &verify_s);
    println!(
        "  {:<40} {:.0} cosignatures/s",
        "throughput (both witnesses)",
        2.0 * b.epochs as f64 / wall_b
    );
    let c = |x: Option<f64>| x.map_or("not measurable".into(), |v| format!("{v:.1} µs"));
    println!(
        " (c) witness CPU per cosignature (utime+stime)  w1 {}  w2 {}",
        c(cpu_per_cosig_us[0]),
        c(cpu_per_cosig_us[1])
    );
    match (&tsa, &tsa_skipped) {
        (Some(s), _) => {
            println!(" (d) RFC 3161 round trip (openssl ts -reply behind tests/tsa/tsa_shim.py)");
            row_ms("timestamp one checkpoint", s);
        }
        (None, why) => println!(
            " (d) RFC 3161 round trip: skipped ({})",
            crate::esc(why.as_deref().unwrap_or(""))
        ),
    }
    if let Some(s) = &pass_s {
        println!(
            " (e) a whole `afr witness` pass (process: open the store, sign, both witnesses), {} passes",
            b.passes
        );
        row_ms("afr witness --policy", s);
    }
    Ok(ExitCode::SUCCESS)
}
