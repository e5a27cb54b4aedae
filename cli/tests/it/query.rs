//! `afr query` end to end: the incident's questions, bundles that verify,
//! errors that point at the token, erased epochs.

use std::{path::Path, process::Output};

use super::{afr, init_with_synthetic, json_with_code};

fn incident_store(tmp: &Path) -> std::path::PathBuf {
    let dir = tmp.join("afr");
    assert!(afr(&dir).arg("init").output().unwrap().status.success());
    let incident = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/incident.jsonl");
    assert!(
        afr(&dir)
            .arg("record")
            .arg(&incident)
            .output()
            .unwrap()
            .status
            .success()
    );
    assert!(afr(&dir).arg("seal").output().unwrap().status.success());
    dir
}

fn query(dir: &Path, args: &[&str]) -> Output {
    afr(dir).arg("query").args(args).output().unwrap()
}

/// The `--json` lines of a successful query.
fn json_lines(dir: &Path, expr: &str) -> Vec<serde_json::Value> {
    let out = query(dir, &[expr, "--json"]);
    assert!(
        out.status.success(),
        "{expr}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn seqs(v: &[serde_json::Value]) -> Vec<u64> {
    v.iter().map(|x| x["seq"].as_u64().unwrap()).collect()
}

#[test]
fn the_incident_is_answered_one_command_per_question() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = incident_store(tmp.path());

    // The destructive call.
    let drop = json_lines(&dir, r#"effects.state_changes ~ "dropped schema""#);
    assert_eq!(seqs(&drop), [5]);
    assert_eq!(drop[0]["epoch"], 0);
    assert_eq!(drop[0]["event"]["intent"]["tool"], "psql");
    assert_eq!(
        drop[0]["event"]["context_provenance"]["environment"],
        "production"
    );
    // The guardrails that evaluated the DROP, and what they said.
    let guarded = json_lines(
        &dir,
        r#"intent.args.sql ~ "DROP" and policy_evaluation[].guardrail exists"#,
    );
    assert_eq!(seqs(&guarded), [2]);
    let names: Vec<&str> = guarded[0]["event"]["policy_evaluation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["guardrail"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["destructive-sql", "prod-host-denylist"]);
    // Its delegation chain up to the root request, and the approver on it.
    let chain = json_lines(&dir, "ancestors(5)");
    assert_eq!(seqs(&chain), [3, 4]);
    let approver = json_lines(&dir, "ancestors(5) and human_approval exists");
    assert_eq!(
        approver[0]["event"]["human_approval"]["approver"],
        "j.doe@acme.example"
    );
    // The default table, with the relation's note.
    let out = query(&dir, &["ancestors(5)"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("request_approval"), "{text}");
    assert!(text.contains("approved by j.doe@acme.example"), "{text}");
    assert!(text.contains("root request is event 3"), "{text}");
    assert!(text.contains("2 events matched"), "{text}");

    // The chain and the destructive call as evidence a third party checks.
    let bundle = tmp.path().join("case.bundle");
    let out = query(
        &dir,
        &[
            "ancestors(5) or seq = 5",
            "--disclose",
            bundle.to_str().unwrap(),
            "--with-keys",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_with_code(afr(&dir).args(["verify-bundle", "--json"]).arg(&bundle), 0);
    assert_eq!(v["outcome"], "verified");
    assert_eq!(v["events"], serde_json::json!([3, 4, 5]));
    assert_eq!(v["opened"].as_array().unwrap().len(), 3);
}

#[test]
fn a_bad_query_is_a_usage_error_pointing_at_the_token() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = incident_store(tmp.path());
    let out = query(
        &dir,
        &[r#"intent.tool = "psql" and human_approval.aprover = "x""#],
    );
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("unknown field `aprover` in `human_approval`"),
        "{err}"
    );
    assert!(err.contains("(column 41)"), "{err}");
    let caret_line = err.lines().last().unwrap();
    assert_eq!(caret_line, format!("  {}^^^^^^^", " ".repeat(40)), "{err}");
    assert!(out.stdout.is_empty());
    // A runtime error names the event.
    let out = query(&dir, &["descendants(99)"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no event 99"));
    // Nothing to disclose is an error, not an empty bundle.
    let out = query(
        &dir,
        &[
            r#"intent.tool = "nothing""#,
            "--disclose",
            tmp.path().join("x.bundle").to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(!tmp.path().join("x.bundle").exists());
}

#[test]
fn erased_epochs_are_reported_by_queries_not_fatal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    init_with_synthetic(&dir, 300);
    assert!(
        afr(&dir)
            .args(["erase", "--epoch", "1"])
            .output()
            .unwrap()
            .status
            .success()
    );
    let out = query(&dir, &[r#"intent.tool = "psql""#]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("100 events of erased epochs could not be examined"),
        "{text}"
    );
    assert!(text.contains("100-199"), "{text}");
    let lines = json_lines(&dir, "seq in 150..152");
    assert_eq!(seqs(&lines), [150, 151]);
    assert!(
        lines
            .iter()
            .all(|l| l["erased"] == true && l["event"].is_null())
    );
    let out = query(&dir, &["seq in 150..152"]);
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("payload destroyed by erasure of epoch 1")
    );
}
