//! Signed approvals through the MCP gateway (`docs/spec/approvals.md`): a rule with
//! `signed_by` holds a call until `afr approve` brings a valid signature over its exact
//! action, by an SSH key (the real `ssh-keygen -Y sign`) or an Ethereum key (EIP-712); a
//! missing signature is refused before anything is decided, a signature over other arguments
//! or by a key not in the policy is refused and recorded, and the disclosed events verify
//! offline with the approvers pinned.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use afr_core::approval::Statement;
use serde_json::{Value, json};

use super::{
    afr, initialised,
    mcp::{
        Client, assert_not_approved, assert_text, events, held_calls, query_lines, server_bin,
        write_policy,
    },
    ok,
};

/// Anvil's second test key, and its address.
const BOB_KEY: &str = "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d";
const BOB: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

/// A fresh Ed25519 key made by `ssh-keygen` in `dir`: its private key's path and its public
/// key line.
fn ssh_key(dir: &Path, name: &str) -> (PathBuf, String) {
    let key = dir.join(name);
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen (scripts/setup.sh installs openssh-client)");
    assert!(st.success());
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let line: Vec<&str> = public.split_whitespace().take(2).collect();
    (key, line.join(" "))
}

fn call(c: &mut Client, id: u64, path: &Path, content: &str) {
    c.send_raw(
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": path, "content": content}}})
        .to_string(),
    );
}

/// The reference filesystem MCP server serving a fresh `t/files`: the folder and its command.
fn filesystem(t: &Path) -> (PathBuf, Vec<String>) {
    let root = t.join("files");
    std::fs::create_dir(&root).unwrap();
    let command = vec![
        server_bin("mcp-server-filesystem")
            .to_str()
            .unwrap()
            .to_owned(),
        root.to_str().unwrap().to_owned(),
    ];
    (root, command)
}

/// Bob's Ethereum key in a 0600 file in `t`.
fn bob_key(t: &Path) -> PathBuf {
    let key = t.join("bob.key");
    std::fs::write(&key, BOB_KEY).unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    key
}

fn held_id(dir: &Path) -> String {
    held_calls(dir, 1)[0]["id"].as_str().unwrap().to_owned()
}

#[test]
fn signed_approvals_gate_the_call_and_verify_offline() {
    let (tmp, dir) = initialised();
    let t = tmp.path();
    let (root, command) = filesystem(t);
    let (alice_key, alice) = ssh_key(t, "alice");
    let (carol_key, _) = ssh_key(t, "carol");
    let bob_key = bob_key(t);
    let policy = write_policy(
        &t.join("policy.toml"),
        &format!(
            r#"
[[approver]]
name = "alice@acme.example"
keys = ["{alice}"]

[[approver]]
name = "bob@acme.example"
keys = ["{BOB}"]

[[rule]]
id = "writes-need-a-signature"
tool = "write_file"
verdict = "escalate"
signed_by = ["alice@acme.example", "bob@acme.example"]
"#
        ),
    );
    let mut c = Client::start(&dir, &["--policy", &policy], &command);
    c.initialize();

    // Unsigned: `afr approve` refuses before deciding anything; the call stays held.
    let a = root.join("a.txt");
    call(&mut c, 2, &a, "by alice");
    let id = held_id(&dir);
    let out = afr(&dir).args(["approve", &id]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("needs an approval signed by one of: alice@acme.example, bob@acme.example"),
        "{err}"
    );
    assert_eq!(held_calls(&dir, 1)[0]["decided"], false);
    // Signed with alice's SSH key: forwarded.
    let out = ok(afr(&dir)
        .args(["approve", &id, "--ssh-key"])
        .arg(&alice_key));
    assert!(String::from_utf8_lossy(&out.stdout).contains("signed"));
    let r = c.response(&json!(2));
    assert!(r.get("result").is_some(), "{r}");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "by alice");

    // Signed with bob's Ethereum key (EIP-712): forwarded.
    let b = root.join("b.txt");
    call(&mut c, 3, &b, "by bob");
    let id = held_id(&dir);
    ok(afr(&dir).args(["approve", &id, "--eth-key"]).arg(&bob_key));
    let r = c.response(&json!(3));
    assert!(r.get("result").is_some(), "{r}");

    // An external signer signs other arguments: the gateway refuses the call and records why.
    let x = root.join("x.txt");
    call(&mut c, 4, &x, "the shown content");
    let id = held_id(&dir);
    let printed = ok(afr(&dir).args(["approve", &id, "--print", "ssh"]));
    let message = String::from_utf8(printed.stdout).unwrap();
    assert!(
        message.starts_with("afr-approval-v1\naction: "),
        "{message}"
    );
    assert!(message.contains("tool: \"write_file\""), "{message}");
    let kept = dir.join("approvals").join(format!("{id}.statement.json"));
    let mut st: Statement = serde_json::from_slice(&std::fs::read(&kept).unwrap()).unwrap();
    assert_eq!(st.ssh_message(), message);
    // What the approver was really shown: another content.
    let other = held_calls(&dir, 1)[0]["intent"].clone();
    let mut other: afr_core::event::Intent = serde_json::from_value(other).unwrap();
    other.args["content"] = "something else".into();
    let execution: afr_core::event::Execution =
        serde_json::from_value(held_calls(&dir, 1)[0]["execution"].clone()).unwrap();
    st.action = afr_core::approval::action_digest(&other, Some(&execution)).to_hex();
    std::fs::write(&kept, serde_json::to_vec(&st).unwrap()).unwrap();
    let sig = ssh_sign(&alice_key, &st.ssh_message(), t);
    let out = ok(afr(&dir)
        .args(["approve", &id, "--signature"])
        .arg(format!("@{}", sig.display())));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the gateway will refuse it"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = c.response(&json!(4));
    assert_not_approved(&r, "signature was refused");
    assert_text(&r["error"]["message"], "approval-digest", &r);
    assert!(!x.exists(), "a call with a mismatched signature ran");

    // A valid signature by a key the policy does not name: refused.
    let y = root.join("y.txt");
    call(&mut c, 5, &y, "by carol");
    let id = held_id(&dir);
    ok(afr(&dir)
        .args(["approve", &id, "--ssh-key"])
        .arg(&carol_key));
    let r = c.response(&json!(5));
    assert_not_approved(&r, "none of the approvers");
    assert!(!y.exists());
    let (_, _, code) = c.finish();
    assert_eq!(code, Some(0));

    let evs = events(&dir);
    assert_eq!(evs.len(), 4, "{evs:#?}");
    let (ea, eb) = (&evs[0], &evs[1]);
    assert_eq!(ea["human_approval"]["approver"], "alice@acme.example");
    assert_eq!(ea["human_approval"]["signature"]["scheme"], "ssh");
    assert_eq!(ea["human_approval"]["signature"]["signer"], alice.as_str());
    assert_eq!(eb["human_approval"]["approver"], "bob@acme.example");
    assert_eq!(eb["human_approval"]["signature"]["scheme"], "eip712");
    assert_eq!(eb["human_approval"]["signature"]["signer"], BOB);
    for (e, why) in [
        (&evs[2], "approval-digest"),
        (&evs[3], "none of the approvers"),
    ] {
        assert!(e.get("human_approval").is_none(), "{e}");
        assert!(e.get("execution").is_none(), "{e}");
        let refusal = &e["policy_evaluation"][1];
        assert_eq!(refusal["guardrail"], "signed-approval", "{e}");
        assert_eq!(refusal["verdict"], "deny");
        assert!(refusal["reason"].as_str().unwrap().contains(why), "{e}");
    }

    // Disclosed with keys, the two signed approvals verify offline against pinned approvers.
    ok(afr(&dir).arg("seal"));
    let seqs: Vec<String> = query_lines(&dir)
        .iter()
        .map(|v| v["seq"].to_string())
        .collect();
    let bundle = t.join("approvals.bundle");
    ok(afr(&dir)
        .args(["disclose", "--with-keys", "--seq", &seqs.join(","), "--out"])
        .arg(&bundle));
    let recorder = ea["human_approval"]["signature"]["statement"]["recorder"]
        .as_str()
        .unwrap()
        .to_owned();
    let trust = |approvers: &str| {
        format!(
            "chain_id = 31337\n[[party]]\nname = \"Acme\"\nrecorders = [\"{recorder}\"]\n{approvers}"
        )
    };
    let both = trust(&format!(
        "[[party.approver]]\nname = \"alice@acme.example\"\nkeys = [\"{alice}\"]\n\
         [[party.approver]]\nname = \"bob@acme.example\"\nkeys = [\"{BOB}\"]\n"
    ));
    let bytes = std::fs::read(&bundle).unwrap();
    let verdict = |text: &str| {
        let t = afr_verify::Trust::new(Some(("trust.toml", text)), None, None, None).unwrap();
        afr_verify::verify(
            afr_verify::Kind::Bundle,
            &bytes,
            &t,
            afr_verify::Source::None,
        )
        .unwrap()
        .to_json(Some(&t))
    };
    let v = verdict(&both);
    // Not anchored in this test: incomplete at best, never tampered.
    assert_eq!(v["outcome"], "incomplete", "{v:#}");
    let approvals = v["approvals"].as_array().unwrap();
    let signed: Vec<&Value> = approvals
        .iter()
        .filter(|a| a["status"] == "signed")
        .collect();
    assert_eq!(signed.len(), 2, "{v:#}");
    // Bob is not pinned: his approval is attributed to nobody trusted.
    let only_alice = trust(&format!(
        "[[party.approver]]\nname = \"alice@acme.example\"\nkeys = [\"{alice}\"]\n"
    ));
    let v = verdict(&only_alice);
    assert_eq!(v["outcome"], "tampered", "{v:#}");
    assert_eq!(v["first_failure"]["check"], "approval-signer", "{v:#}");
}

/// `ssh-keygen -Y sign` of `message` with `key`: the signature file.
fn ssh_sign(key: &Path, message: &str, dir: &Path) -> PathBuf {
    let msg = dir.join("message.txt");
    std::fs::write(&msg, message).unwrap();
    let st = Command::new("ssh-keygen")
        .args(["-q", "-Y", "sign", "-n", "afr-approval-v1", "-f"])
        .arg(key)
        .arg(&msg)
        .status()
        .unwrap();
    assert!(st.success());
    msg.with_extension("txt.sig")
}

#[test]
fn approve_an_event_file_prints_a_signed_human_approval() {
    let (tmp, dir) = initialised();
    let t = tmp.path();
    let (key, public) = ssh_key(t, "dana");
    let ev = json!({"category": "database", "intent": {"tool": "psql", "args": {"sql": "DROP TABLE users"}},
        "execution": {"command": "DROP TABLE users", "target": "db.prod.internal"}});
    let file = t.join("action.json");
    std::fs::write(&file, ev.to_string()).unwrap();
    let recorder = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
    let out = ok(afr(&dir)
        .args([
            "approve",
            "--recorder",
            recorder,
            "--as",
            "dana",
            "--ssh-key",
        ])
        .arg(&key)
        .arg("--file")
        .arg(&file));
    let h: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(h["approver"], "dana");
    assert_eq!(h["signature"]["signer"], public.as_str());
    assert_eq!(h["signature"]["statement"]["target"], "db.prod.internal");
    assert_eq!(h["signature"]["statement"]["recorder"], recorder);
    // The approval, put into the event, holds for that event and recorder.
    let mut full = ev.clone();
    full["human_approval"] = h;
    let input = afr_core::EventInput::from_json(full.to_string().as_bytes(), 1 << 20).unwrap();
    let (_, p) = input.into_payload();
    let mut rec = [0u8; 20];
    hex::decode_to_slice(&recorder[2..], &mut rec).unwrap();
    let now = afr_recorder::now_us();
    let signed = afr_core::approval::check(&p, &rec, now).unwrap().unwrap();
    assert_eq!(signed.signer, public);
    // Another recorder, or an hour later than --valid-for allows: it does not hold.
    assert!(afr_core::approval::check(&p, &[1; 20], now).is_err());
    assert!(afr_core::approval::check(&p, &rec, now + 3_600_000_000).is_err());

    // A key held only by ssh-agent, named by its public half.
    let sock = t.join("agent.sock");
    let mut agent = Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&sock)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !sock.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "ssh-agent did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let added = Command::new("ssh-add")
        .arg("-q")
        .arg(&key)
        .env("SSH_AUTH_SOCK", &sock)
        .status()
        .unwrap();
    assert!(added.success());
    std::fs::remove_file(&key).unwrap();
    let out = afr(&dir)
        .args(["approve", "--recorder", recorder, "--ssh-key"])
        .arg(key.with_extension("pub"))
        .arg("--file")
        .arg(&file)
        .env("SSH_AUTH_SOCK", &sock)
        .output()
        .unwrap();
    let _ = agent.kill();
    let _ = agent.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let h: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(h["signature"]["signer"], public.as_str());
}

#[test]
fn a_signed_approval_replayed_after_the_gateway_restarts_is_refused() {
    let (tmp, dir) = initialised();
    let t = tmp.path();
    let (root, command) = filesystem(t);
    let bob_key = bob_key(t);
    let policy = write_policy(
        &t.join("policy.toml"),
        &format!(
            r#"
[[approver]]
name = "bob@acme.example"
keys = ["{BOB}"]

[[rule]]
id = "writes-need-a-signature"
tool = "write_file"
verdict = "escalate"
signed_by = ["bob@acme.example"]
"#
        ),
    );
    // Bob approves one write, signed: it runs.
    let a = root.join("a.txt");
    let mut c = Client::start(&dir, &["--policy", &policy], &command);
    c.initialize();
    call(&mut c, 2, &a, "once");
    let id = held_id(&dir);
    ok(afr(&dir).args(["approve", &id, "--eth-key"]).arg(&bob_key));
    assert!(c.response(&json!(2)).get("result").is_some());
    let (_, _, code) = c.finish();
    assert_eq!(code, Some(0));
    let signed = events(&dir)[0]["human_approval"]["signature"].clone();
    std::fs::remove_file(&a).unwrap();

    // The MCP client restarts (a new `afr mcp wrap`); the same call comes again and the same
    // signed decision is handed in: the gateway refuses it before forwarding.
    let mut c = Client::start(&dir, &["--policy", &policy], &command);
    c.initialize();
    call(&mut c, 2, &a, "once");
    let id = held_id(&dir);
    let kept = dir.join("approvals").join(format!("{id}.statement.json"));
    std::fs::write(&kept, signed["statement"].to_string()).unwrap();
    ok(afr(&dir)
        .args(["approve", &id, "--signature"])
        .arg(signed["signature"].as_str().unwrap()));
    let r = c.response(&json!(2));
    assert_not_approved(&r, "used before");
    assert!(!a.exists(), "the replayed approval ran the call again");
    let (_, _, code) = c.finish();
    assert_eq!(code, Some(0));
    // The refusal is recorded, with why.
    let evs = events(&dir);
    assert_eq!(evs.len(), 2, "{evs:#?}");
    let refusal = &evs[1]["policy_evaluation"][1];
    assert_eq!(refusal["guardrail"], "signed-approval", "{evs:#?}");
    assert!(
        refusal["reason"]
            .as_str()
            .unwrap()
            .contains("a replayed approval"),
        "{evs:#?}"
    );
}

#[test]
fn an_approver_reviews_the_full_arguments_of_a_call_recorded_by_their_hash() {
    let (tmp, dir) = initialised();
    let t = tmp.path();
    let (root, command) = filesystem(t);
    let policy = write_policy(
        &t.join("policy.toml"),
        "[[rule]]\nid = \"writes\"\ntool = \"write_file\"\nverdict = \"escalate\"\n",
    );
    let mut c = Client::start(&dir, &["--policy", &policy], &command);
    c.initialize();
    // Over the 256 KiB recording cap: the event (and an approval's digest) holds their hash.
    let big = format!("{}THE-LAST-LINE", "x".repeat(300 * 1024));
    call(&mut c, 2, &root.join("big.txt"), &big);
    let id = held_id(&dir);
    let out = ok(afr(&dir).args(["approve", &id, "--print", "ssh"]));
    let shown = String::from_utf8_lossy(&out.stderr);
    assert!(
        shown.contains("over the recording cap"),
        "{}",
        &shown[..400.min(shown.len())]
    );
    assert!(
        shown.contains("the full arguments below are the ones that hash is of"),
        "{}",
        &shown[..400.min(shown.len())]
    );
    assert!(
        shown.contains("THE-LAST-LINE"),
        "the full arguments are not shown"
    );
    ok(afr(&dir).args(["reject", &id]));
    let r = c.response(&json!(2));
    assert!(r.get("error").is_some(), "{r}");
    c.finish();
}

/// #31, defect 1: arguments just under the 256 KiB cap, approved: the approval (its prompt shows
/// the arguments, pretty-printed) must not push the event over the recorder's cap; the call
/// runs and is recorded once, with its approval. The real memory server's `create_entities`
/// takes nested lists, which pretty-print at three to four times their JSON size.
#[test]
fn an_approved_call_with_large_arguments_is_recorded() {
    let (tmp, dir) = initialised();
    let t = tmp.path();
    let memory = t.join("memory.json");
    let command = vec![
        "env".to_owned(),
        format!("MEMORY_FILE_PATH={}", memory.display()),
        server_bin("mcp-server-memory").display().to_string(),
    ];
    let policy = write_policy(
        &t.join("policy.toml"),
        "[[rule]]\nid = \"memory-writes\"\ntool = \"create_entities\"\nverdict = \"escalate\"\n",
    );
    let mut c = Client::start(&dir, &["--policy", &policy], &command);
    c.initialize();
    let observations: Vec<String> = (0..60_000).map(|i| format!("{}", i % 10)).collect();
    let args =
        json!({"entities": [{"name": "big", "entityType": "test", "observations": observations}]});
    let text = args.to_string();
    assert!(
        text.len() > 160 * 1024 && text.len() < 256 * 1024,
        "{}",
        text.len()
    );
    assert!(serde_json::to_string_pretty(&args).unwrap().len() > 3 * text.len());
    c.send_raw(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "create_entities", "arguments": args}})
        .to_string(),
    );
    let id = held_id(&dir);
    ok(afr(&dir).args(["approve", &id, "--as", "reviewer"]));
    let r = c.response(&json!(2));
    assert!(r.get("result").is_some(), "{r}");
    c.finish();
    let ev = super::mcp::events(&dir);
    let w: Vec<&serde_json::Value> = ev
        .iter()
        .filter(|e| e["intent"]["tool"] == "create_entities")
        .collect();
    assert_eq!(w.len(), 1, "the approved call was not recorded");
    assert_eq!(w[0]["human_approval"]["decision"], "approved");
    assert_eq!(w[0]["intent"]["args"], args);
    let prompt = w[0]["human_approval"]["prompt"].as_str().unwrap();
    assert!(
        prompt.len() < 64 * 1024,
        "the prompt is {} bytes",
        prompt.len()
    );
    assert!(
        prompt.contains("sha256:"),
        "a capped prompt names the arguments' hash"
    );
    assert_eq!(afr_client::journal::waiting(&dir), 0);
}
