//! `afr` anchoring commands: fork alarm, keystore, and killing `afr anchor` mid-flight.

use std::{
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use afr_anchorer::{AnchorStore, ForkAlarm};
use afr_recorder::{Config, Recorder};
use afr_testkit::{DEV_KEY, anvil, anvil_on, cast_at as cast, shell_event};

use super::{afr, initialised, ok};

/// `afr` with no anchoring key, passphrase or endpoint from the test's own environment.
fn afr_clean(dir: &Path) -> Command {
    let mut c = afr(dir);
    c.env_remove("AFR_ANCHOR_KEY")
        .env_remove("AFR_KEYSTORE_PASSWORD")
        .env_remove("AFR_KEYSTORE_PASSWORD_FILE")
        .env_remove("AFR_RPC_URL");
    c
}

/// [`afr_clean`] anchoring with anvil's first dev account (test ether on a throwaway local
/// chain only).
fn afr_keyed(dir: &Path) -> Command {
    let mut c = afr_clean(dir);
    c.env("AFR_ANCHOR_KEY", DEV_KEY);
    c
}

/// The string `key` of the JSON object a command printed.
fn json_str(stdout: &[u8], key: &str) -> String {
    serde_json::from_slice::<serde_json::Value>(stdout).unwrap()[key]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Records one `shell` event per tool name into the store at `dir`, `epoch_size` to an epoch.
fn record_shell(dir: &Path, epoch_size: u64, tools: impl IntoIterator<Item = String>) {
    let r = Recorder::open(dir, Config::with_epoch_size(epoch_size)).unwrap();
    for tool in tools {
        r.record(shell_event(&tool)).unwrap();
    }
}

/// Local epoch roots, 0x hex, in order.
fn local_roots(dir: &Path) -> Vec<String> {
    let r = Recorder::open(dir, Config::default()).unwrap();
    r.store()
        .epochs_from(0)
        .unwrap()
        .map(|kv| {
            let (_, b) = kv.unwrap();
            format!(
                "0x{}",
                afr_core::EpochHeader::decode(&b).unwrap().root().to_hex()
            )
        })
        .collect()
}

/// Asserts the chain holds exactly the local roots for `recorder`: head is the last local
/// epoch, every root matches, and each epoch has exactly one `Anchored` event.
fn assert_chain_equals_local(url: &str, contract: &str, recorder: &str, dir: &Path) {
    let roots = local_roots(dir);
    assert!(!roots.is_empty());
    let head = cast(
        url,
        &["call", contract, "head(address)(bool,uint64)", recorder],
    );
    assert_eq!(
        head.split_whitespace().collect::<Vec<_>>(),
        ["true", &(roots.len() - 1).to_string()],
        "chain head"
    );
    for (e, root) in roots.iter().enumerate() {
        let onchain = cast(
            url,
            &[
                "call",
                contract,
                "rootOf(address,uint64)(bytes32)",
                recorder,
                &e.to_string(),
            ],
        );
        assert_eq!(&onchain, root, "epoch {e}");
    }
    let epochs: Vec<u64> = afr_testkit::anchored_logs(url, contract, recorder)
        .into_iter()
        .map(|(e, _)| e)
        .collect();
    assert_eq!(
        epochs,
        (0..roots.len() as u64).collect::<Vec<_>>(),
        "one Anchored event per epoch"
    );
    let r = Recorder::open(dir, Config::default()).unwrap();
    for e in 0..roots.len() as u64 {
        assert!(
            r.store().anchor(e).unwrap().is_some(),
            "receipt of epoch {e}"
        );
    }
}

fn status(dir: &Path) -> (Option<i32>, serde_json::Value, String) {
    let json = afr(dir).args(["status", "--json"]).output().unwrap();
    let text = afr(dir).arg("status").output().unwrap();
    assert_eq!(json.status.code(), text.status.code());
    (
        json.status.code(),
        serde_json::from_slice(&json.stdout).unwrap(),
        String::from_utf8_lossy(&text.stdout).into_owned(),
    )
}

#[test]
fn a_fork_alarm_in_the_store_makes_status_loud_and_anchor_refuse() {
    let (_tmp, dir) = initialised();
    let (code, v, text) = status(&dir);
    assert_eq!(code, Some(0), "{text}");
    assert!(v["fork_alarm"].is_null());
    assert!(!text.contains("FORK ALARM"), "{text}");

    let alarm = ForkAlarm {
        epoch: 4,
        local: [1; 32],
        onchain: [2; 32],
        chain_id: 31337,
        contract: [3; 20],
        tx: Some([4; 32]),
        block: Some(17),
        seen_at_us: 1_700_000_000_000_000,
    };
    {
        let r = Recorder::open(&dir, Config::default()).unwrap();
        r.store().put_fork_alarm(&alarm).unwrap();
        // A second fork does not overwrite the first.
        r.store()
            .put_fork_alarm(&ForkAlarm {
                epoch: 9,
                ..alarm.clone()
            })
            .unwrap();
        assert_eq!(r.store().fork_alarm().unwrap(), Some(alarm.clone()));
    }
    let (code, v, text) = status(&dir);
    assert_eq!(code, Some(3), "{text}");
    assert_eq!(v["fork_alarm"]["epoch"], 4);
    assert_eq!(
        v["fork_alarm"]["local_root"],
        format!("0x{}", "01".repeat(32))
    );
    assert_eq!(
        v["fork_alarm"]["onchain_root"],
        format!("0x{}", "02".repeat(32))
    );
    assert_eq!(v["fork_alarm"]["tx"], format!("0x{}", "04".repeat(32)));
    assert_eq!(v["fork_alarm"]["block"], 17);
    assert!(
        text.lines()
            .next()
            .unwrap()
            .starts_with("FORK ALARM: epoch 4"),
        "{text}"
    );

    // `afr anchor` refuses before it talks to any chain (nothing listens on port 9).
    let contract = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
    let anchor = |extra: &[&str]| {
        afr(&dir)
            .args([
                "anchor",
                "--rpc",
                "http://127.0.0.1:9",
                "--contract",
                contract,
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = anchor(&[]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("FORK ALARM: epoch 4"));
    // Clearing names the epoch; a wrong one is refused and the alarm stays.
    let out = anchor(&["--clear-fork-alarm", "5"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("about epoch 4, not 5"));
    assert_eq!(status(&dir).0, Some(3));

    Recorder::open(&dir, Config::default())
        .unwrap()
        .store()
        .clear_fork_alarm()
        .unwrap();
    assert_eq!(status(&dir).0, Some(0));
}

#[test]
fn an_encrypted_keystore_signs_anchors_and_a_wrong_passphrase_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let chain = anvil();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    let pass = "tr0ub4dor-and-3";

    // No passphrase: refused before anything is created.
    let out = afr_clean(&dir)
        .args(["init", "--keystore"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a passphrase"));
    assert!(!dir.exists());

    let out = ok(afr_clean(&dir)
        .args(["init", "--keystore"])
        .env("AFR_KEYSTORE_PASSWORD", pass));
    assert!(!String::from_utf8_lossy(&out.stdout).contains(pass));
    let ks = dir.join("anchor.keystore.json");
    assert_eq!(
        std::fs::metadata(&ks).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(
        !dir.join("anchor.key").exists(),
        "no plain key beside the keystore"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&ks).unwrap()).unwrap();
    assert_eq!(v["version"], 3);

    let st = afr_clean(&dir).args(["status", "--json"]).output().unwrap();
    let recorder = json_str(&st.stdout, "recorder");
    // Fund the fresh key on the throwaway chain.
    cast(
        &chain.url,
        &["rpc", "anvil_setBalance", &recorder, "0x56bc75e2d63100000"],
    );

    // The passphrase from a file (first line), for deploy.
    let pw_file = tmp.path().join("pw");
    std::fs::write(&pw_file, format!("{pass}\n")).unwrap();
    let out = ok(afr_clean(&dir)
        .args(["deploy", "--json", "--rpc", &chain.url])
        .arg("--password-file")
        .arg(&pw_file));
    let contract = json_str(&out.stdout, "contract");
    // Deployed from the keystore's key: its address is the recorder id.
    assert_eq!(cast(&chain.url, &["nonce", &recorder]), "1");

    record_shell(&dir, 20, (0..60).map(|i| format!("t{i}")));
    let anchor = |pass: Option<&str>| {
        let mut c = afr_clean(&dir);
        c.args(["anchor", "--rpc", &chain.url, "--contract", &contract]);
        if let Some(p) = pass {
            c.env("AFR_KEYSTORE_PASSWORD", p);
        }
        c.output().unwrap()
    };
    let out = anchor(Some("not-the-passphrase"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("wrong passphrase"), "{err}");
    assert!(
        !err.contains("not-the-passphrase") && !err.contains(pass),
        "{err}"
    );
    let out = anchor(None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--password-file"), "{err}");
    assert_eq!(cast(&chain.url, &["nonce", &recorder]), "1", "nothing sent");

    let out = anchor(Some(pass));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_chain_equals_local(&chain.url, &contract, &recorder, &dir);
}

#[test]
fn afr_anchor_killed_at_random_points_never_duplicates_or_skips_an_epoch() {
    // One block a second: every pass waits for its transactions to be mined, so a kill in the
    // first 400 ms lands inside the pass (reconciling, signing, sent but not yet mined), not
    // after it, however fast the machine.
    let chain = anvil_on(0, &["--block-time", "1"]);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    ok(afr_keyed(&dir).arg("init"));
    let out = ok(afr_keyed(&dir).args(["deploy", "--json", "--rpc", &chain.url]));
    let contract = json_str(&out.stdout, "contract");
    // The recorder id is the key's address (anvil's first dev account).
    let recorder = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
    let st = afr_clean(&dir).args(["status", "--json"]).output().unwrap();
    assert_eq!(json_str(&st.stdout, "recorder"), recorder.to_lowercase());

    let mut rng = super::Lcg(0x5eed_cafe);
    let (mut killed_running, mut seq) = (0, 0u64);
    for round in 0..12 {
        record_shell(&dir, 5, (seq..seq + 40).map(|s| format!("t{s}")));
        seq += 40;
        let batch = 1 + rng.next(3);
        let mut child = afr_keyed(&dir)
            .args(["anchor", "--rpc", &chain.url, "--contract", &contract])
            .args(["--max-batch", &batch.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.next(400)));
        if child.try_wait().unwrap().is_none() {
            killed_running += 1;
        }
        child.kill().unwrap(); // SIGKILL
        let out = child.wait_with_output().unwrap();
        eprintln!("round {round}: max batch {batch}, exit {:?}", out.status);
        // Killed, or finished cleanly: a run that starts after a killed one must never fail
        // (it waits for the transactions the killed run left in the mempool).
        assert!(
            out.status.success()
                || std::os::unix::process::ExitStatusExt::signal(&out.status) == Some(9),
            "round {round}: afr anchor failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(
        killed_running >= 6,
        "only {killed_running} kills hit a running anchorer"
    );

    ok(afr_keyed(&dir).args(["anchor", "--rpc", &chain.url, "--contract", &contract]));
    assert_chain_equals_local(&chain.url, &contract, recorder, &dir);
    let (code, v, _) = status(&dir);
    assert_eq!(code, Some(0));
    assert_eq!(v["sealed_epochs"], 96);
    assert_eq!(v["anchored_epochs"], 96);
    assert_eq!(v["pending_epochs"], 0);
    // Every anchoring transaction succeeded: none was a duplicate that reverted.
    let sent = cast(&chain.url, &["nonce", recorder])
        .parse::<u64>()
        .unwrap();
    let mined_ok = {
        let logs = cast(
            &chain.url,
            &[
                "logs",
                "--json",
                "--from-block",
                "0",
                "--address",
                &contract,
            ],
        );
        let logs: Vec<serde_json::Value> = serde_json::from_str(&logs).unwrap();
        let mut txs: Vec<String> = logs
            .iter()
            .map(|l| l["transactionHash"].as_str().unwrap().to_owned())
            .collect();
        txs.sort();
        txs.dedup();
        txs.len() as u64
    };
    assert_eq!(
        sent,
        1 + mined_ok,
        "deploy plus one successful transaction per send"
    );
}

/// The endpoint comes from AFR_RPC_URL or a 0600 `rpc.url` file as well as `--rpc`; errors
/// never show its path (where hosted endpoints keep the API key); `afr status` says which
/// anchors are confirmed and under which rule.
#[test]
fn the_endpoint_comes_from_env_or_a_private_file_and_is_never_printed() {
    use std::os::unix::fs::PermissionsExt;
    let chain = anvil();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    ok(afr_keyed(&dir).arg("init"));
    record_shell(&dir, 5, (0..12).map(|i| format!("t{i}")));
    // deploy: the endpoint from the environment.
    let out = ok(afr_keyed(&dir)
        .args(["deploy", "--json"])
        .env("AFR_RPC_URL", &chain.url));
    let contract = json_str(&out.stdout, "contract");

    // No endpoint at all: a clear refusal.
    let out = afr_keyed(&dir)
        .args(["anchor", "--contract", &contract])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no JSON-RPC endpoint"));

    // A secret-bearing endpoint that fails: the key is in no output.
    let secret = "http://127.0.0.1:9/v3/SECRETKEY0123";
    let out = afr_keyed(&dir)
        .args(["anchor", "--contract", &contract, "--rpc", secret])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains("SECRETKEY0123"), "{all}");
    assert!(all.contains("127.0.0.1"), "{all}");

    // The file must be private.
    let file = dir.join("rpc.url");
    std::fs::write(&file, format!("{}\n", chain.url)).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = afr_keyed(&dir)
        .args(["anchor", "--contract", &contract])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("mode is 644") && !err.contains(&chain.url),
        "{err}"
    );
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = ok(afr_keyed(&dir).args(["anchor", "--contract", &contract]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("anchored 2 new epochs"), "{text}");

    // Two confirmations asked for on a chain that mines only on demand: every anchor is
    // re-checked under the new rule, and counts as covered only once a block more is mined.
    record_shell(&dir, 5, (0..3).map(|i| format!("u{i}")));
    let anchor_2conf =
        || ok(afr_keyed(&dir).args(["anchor", "--contract", &contract, "--confirmations", "2"]));
    anchor_2conf();
    let (_, v, text) = status(&dir);
    assert_eq!(v["receipt_states"]["included"], 3, "{v}");
    assert_eq!(v["anchored_epochs"], 0, "{v}");
    assert_eq!(v["covered_when"], "2 confirmations", "{v}");
    assert!(
        text.contains("covered when confirmed by 2 confirmations"),
        "{text}"
    );
    cast(&chain.url, &["rpc", "evm_mine"]);
    anchor_2conf();
    let (_, v, _) = status(&dir);
    assert_eq!(v["anchored_epochs"], 3, "{v}");
    assert_eq!(v["receipt_states"]["confirmed"], 3, "{v}");
    assert_eq!(v["verified_upto"], 2, "{v}");
    assert!(v["last_anchor"]["cost_wei"].as_str().unwrap() != "0", "{v}");
}
