//! `afr import swe-agent` on the five real SWE-agent trajectories in `tests/data/swe-agent/`.

use std::{
    path::{Path, PathBuf},
    process::Output,
};

use serde_json::Value as Json;

use super::{afr, import_rejected, initialised, status_json, stdout_json};

/// A JSON file, parsed.
fn read_json(path: &Path) -> Json {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The bundled trajectories, sorted by name, with their step counts (38 in all).
fn trajectories() -> Vec<(PathBuf, usize)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/swe-agent");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "traj"))
        .map(|p| {
            let n = read_json(&p)["trajectory"].as_array().unwrap().len();
            (p, n)
        })
        .collect();
    v.sort();
    assert_eq!(v.len(), 5);
    assert_eq!(v.iter().map(|(_, n)| n).sum::<usize>(), 38);
    v
}

/// Every string inside a JSON value.
fn strings(v: &Json, out: &mut Vec<String>) {
    match v {
        Json::String(s) => out.push(s.clone()),
        Json::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Json::Object(m) => m.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// The model's thoughts of every step (at least 30 characters, first line), which must never
/// reach an event.
fn thoughts(files: &[(PathBuf, usize)]) -> Vec<String> {
    let mut t = Vec::new();
    for (p, _) in files {
        for s in read_json(p)["trajectory"].as_array().unwrap() {
            let line = s["thought"]
                .as_str()
                .unwrap_or("")
                .lines()
                .next()
                .unwrap_or("");
            if line.len() >= 30 {
                t.push(line.to_owned());
            }
        }
    }
    assert!(t.len() > 20, "too few thoughts to check: {}", t.len());
    t
}

use afr_testkit::ok as run_ok;

/// `afr import swe-agent ARGS... FILES...`, which must succeed.
fn import(dir: &Path, args: &[&str], files: &[(PathBuf, usize)]) -> Output {
    run_ok(
        afr(dir)
            .args(["import", "swe-agent"])
            .args(args)
            .args(files.iter().map(|(p, _)| p)),
    )
}

#[test]
fn import_swe_agent_records_the_five_real_trajectories_and_the_export_verifies() {
    let (tmp, dir) = initialised();
    let files = trajectories();
    let out = import(&dir, &[], &files);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("imported 38 events from 5 trajectories (0 rejected)"),
        "{err}"
    );
    assert_eq!(status_json(&dir)["events"], 38);

    run_ok(afr(&dir).arg("seal"));
    let log = tmp.path().join("log.afr");
    run_ok(afr(&dir).args(["export", "--out"]).arg(&log));
    let v = stdout_json(&run_ok(
        afr(&dir).args(["verify-export", "--json"]).arg(&log),
    ));
    assert_eq!(v["outcome"], "verified", "{v}");
    assert_eq!(v["events"], 38);

    // Files are recorded in argument order: 6e44b9 (0-4), humanevalfix (5-9), marshmallow
    // (10-20), pydicom (21-32), test-repo (33-37). Marshmallow's step 5 is event 15.
    let bundle = tmp.path().join("case.bundle");
    run_ok(
        afr(&dir)
            .args(["disclose", "--seq", "10,15", "--with-keys", "--out"])
            .arg(&bundle),
    );
    let v = stdout_json(&run_ok(
        afr(&dir).args(["verify-bundle", "--json"]).arg(&bundle),
    ));
    assert_eq!(v["outcome"], "verified", "{v}");
    let opened = v["opened"].as_array().unwrap();
    assert_eq!(opened.len(), 2);
    let first = &opened[0]["payload"];
    assert_eq!(opened[0]["seq"], 10);
    assert_eq!(first["intent"]["tool"], "create");
    assert_eq!(first["intent"]["args"]["filename"], "reproduce.py");
    // The first step of a run has no parent event; the run's problem is on its behalf.
    assert!(first["delegation_provenance"]["parent_event"].is_null());
    assert_eq!(
        first["delegation_provenance"]["on_behalf_of"],
        "swe-agent:problem/marshmallow-code__marshmallow-1867"
    );
    let p = &opened[1]["payload"];
    assert_eq!(opened[1]["seq"], 15);
    assert_eq!(p["intent"]["tool"], "open");
    assert_eq!(
        p["intent"]["args"],
        serde_json::json!({"path": "src/marshmallow/fields.py", "line_number": 1474})
    );
    assert_eq!(
        p["execution"]["command"],
        "open \"src/marshmallow/fields.py\" 1474"
    );
    assert_eq!(p["execution"]["target"], "/testbed");
    assert_eq!(p["delegation_provenance"]["parent_event"]["seq"], 14);
    assert_eq!(
        p["code_provenance"]["commit"],
        "bfd2593d4b416122e30cdefe0c72d322ef471611"
    );
    assert_eq!(p["code_provenance"]["model"], "gpt-4o");
    assert_eq!(p["code_provenance"]["agent"], "swe-agent");
    let rv = &p["effects"]["return_value"];
    assert_eq!(rv["output_bytes"], 4137);
    assert_eq!(rv["truncated"], false);
    assert!(
        rv["output"]
            .as_str()
            .unwrap()
            .starts_with("[File: src/marshmallow/fields.py (1997 lines total)]")
    );
    assert!(rv["output_sha256"].as_str().unwrap().starts_with("sha256:"));
    let mut s = Vec::new();
    strings(p, &mut s);
    assert!(
        !s.iter().any(|x| x.contains("navigate to that line")),
        "the model's thought leaked into the event"
    );
}

#[test]
fn import_swe_agent_print_maps_fields_never_thoughts_and_feeds_afr_record() {
    let (_tmp, dir) = initialised();
    let files = trajectories();
    let out = import(&dir, &["--print", "--first-seq", "0"], &files);
    let lines: Vec<Json> = out
        .stdout
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 38);

    // 6e44b9 step 2: the search/replace form of edit.
    let e = &lines[2];
    assert_eq!(e["category"], "code");
    assert_eq!(e["intent"]["tool"], "edit");
    assert_eq!(
        e["intent"]["args"],
        serde_json::json!({
            "search": "def division(a: float, b: float) -> float",
            "replace": "def division(a: float, b: float) -> float:",
            "replace_all": false
        })
    );
    assert_eq!(e["lane"], "SWE-agent__test-repo-i1");
    assert_eq!(
        e["context_provenance"]["sources"][0]["uri"],
        "https://github.com/SWE-agent/test-repo/issues/1"
    );
    assert_eq!(
        e["code_provenance"]["repository"],
        "https://github.com/SWE-agent/test-repo/"
    );
    // `base_commit: HEAD` is a ref, not a commit id: left out.
    assert!(e["code_provenance"]["commit"].is_null());
    // 6e44b9 step 3: a shell command.
    let e = &lines[3];
    assert_eq!(e["category"], "shell");
    assert_eq!(e["intent"]["tool"], "bash");
    assert_eq!(e["intent"]["args"]["program"], "python3");
    assert_eq!(
        e["execution"]["command"],
        "python3 /SWE-agent__test-repo/tests/missing_colon.py"
    );
    assert_eq!(e["effects"]["return_value"]["output"], "8.2");
    // humanevalfix step 2 (older format): the line-range form of edit, trailing newline gone.
    let e = &lines[7];
    assert_eq!(e["intent"]["tool"], "edit");
    assert_eq!(
        e["intent"]["args"],
        serde_json::json!({"start_line": 15, "end_line": 15,
            "replacement_text": "                distance = abs(elem - elem2)"})
    );
    assert_eq!(e["lane"], "humanevalfix-python-0");
    assert_eq!(e["delegation_provenance"]["parent_event"]["seq"], 6);
    assert_eq!(e["execution"]["target"], "/swe-bench__humanevalfix-python");
    // The last step of each run carries the run's exit status.
    assert_eq!(
        lines[37]["effects"]["external_response"]["exit_status"],
        "submitted"
    );
    assert_eq!(lines[37]["intent"]["tool"], "submit");

    let mut all = Vec::new();
    lines.iter().for_each(|l| strings(l, &mut all));
    for t in thoughts(&files) {
        assert!(
            !all.iter().any(|s| s.contains(&t)),
            "thought leaked into an event: {t}"
        );
    }

    // The printed lines are valid `afr record` input, parent links included.
    let rec = super::record_stdin(&dir, &out.stdout);
    let err = String::from_utf8_lossy(&rec.stderr);
    assert!(rec.status.success(), "{err}");
    assert!(err.contains("recorded 38 events"), "{err}");
}

#[test]
fn import_swe_agent_rejects_a_malformed_file_by_name_and_step_and_records_nothing_of_it() {
    let (tmp, dir) = initialised();
    let files = trajectories();
    let good = &files[0].0;
    let mut j = read_json(&files[2].0);
    j["trajectory"][7]["action"] = Json::from(42);
    let bad = tmp.path().join("bad-step.traj");
    std::fs::write(&bad, serde_json::to_vec(&j).unwrap()).unwrap();
    let not_json = tmp.path().join("cut-short.traj");
    let text = std::fs::read(&files[1].0).unwrap();
    std::fs::write(&not_json, &text[..text.len() / 2]).unwrap();

    let out = afr(&dir)
        .args(["import", "swe-agent"])
        .arg(&bad)
        .arg(good)
        .arg(&not_json)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(65), "{err}");
    assert!(
        err.contains(&format!(
            "{}: step 7 (trajectory[7]): `action` is not a string; nothing imported from this file",
            bad.display()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("{}: not JSON", not_json.display())),
        "{err}"
    );
    assert!(
        err.contains("imported 5 events from 1 trajectories (2 rejected)"),
        "{err}"
    );
    assert_eq!(
        status_json(&dir)["events"],
        5,
        "only the good file's steps are recorded"
    );

    // --print: the same errors, nothing printed from the bad file.
    let out = import_rejected(&dir, &bad);
    assert!(out.stdout.is_empty());
}
