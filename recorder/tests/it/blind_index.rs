//! The blind query index: no plaintext term in any column family or file of the store, the
//! same answers as a scan of the decrypted payloads, and an upgraded store that no longer
//! holds the plaintext terms of the old layout.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use afr_core::EventInput;
use afr_recorder::{
    Column, Config, DB_DIR, RawOp, Recorder, Store, index, init,
    query::{Query, QueryResult},
};
use afr_testkit::synth;

/// In every distinctive value below, and nowhere else: no payload field is stored in
/// plaintext, so any occurrence in the store would come from the index.
const MARKER: &str = "blindidx-7f3a9c";
/// The lane of the marked events: an envelope field, stored in the clear in the records.
/// The scans must find it, or they would prove nothing.
const LANE: &str = "lane-visible-4d2e";

/// The distinctive values of the marked events, one per indexed string field.
fn secrets() -> Vec<(&'static str, String)> {
    vec![
        ("intent.tool", format!("tool-{MARKER}")),
        (
            "policy_evaluation[].guardrail",
            format!("guardrail-{MARKER}"),
        ),
        (
            "human_approval.approver",
            format!("approver-{MARKER}@acme.example"),
        ),
        ("context_provenance.environment", format!("env-{MARKER}")),
        (
            "context_provenance.sources[].uri",
            format!("https://{MARKER}.example/runbook"),
        ),
        (
            "context_provenance.sources[].content_hash",
            format!("sha256:{MARKER}"),
        ),
        ("code_provenance.agent", format!("agent-{MARKER}")),
        (
            "delegation_provenance.organisation",
            format!("org-{MARKER}"),
        ),
    ]
}

fn marked_event(parent: u64) -> EventInput {
    let v: std::collections::HashMap<&str, String> = secrets().into_iter().collect();
    let json = serde_json::json!({
        "category": "shell",
        "lane": LANE,
        "intent": {"tool": v["intent.tool"], "args": {"cmd": "ls"}},
        "policy_evaluation": [{
            "guardrail": v["policy_evaluation[].guardrail"], "version": "1",
            "verdict": "deny", "reason": "r",
        }],
        "human_approval": {
            "approver": v["human_approval.approver"], "prompt": "ok?",
            "decision": "approved", "decided_at_us": 1,
        },
        "context_provenance": {
            "environment": v["context_provenance.environment"],
            "sources": [{
                "uri": v["context_provenance.sources[].uri"],
                "content_hash": v["context_provenance.sources[].content_hash"],
            }],
        },
        "code_provenance": {"agent": v["code_provenance.agent"]},
        "delegation_provenance": {
            "organisation": v["delegation_provenance.organisation"],
            "parent_event": {"seq": parent},
        },
    });
    EventInput::from_json(json.to_string().as_bytes(), 1 << 20).unwrap()
}

/// A synthetic workload with a marked event at every seq ≡ 3 (mod 7), and its marked seqs.
fn workload(n: u64) -> (Vec<EventInput>, Vec<u64>) {
    let mut events = synth::generate(n, 41);
    let mut marked = Vec::new();
    for seq in (3..n).step_by(7) {
        events[seq as usize] = marked_event(seq - 1);
        marked.push(seq);
    }
    (events, marked)
}

fn record(dir: &Path, events: &[EventInput]) -> Recorder {
    init(dir, [0x3c; 20]).unwrap();
    let r = Recorder::open(dir, Config::with_epoch_size(100)).unwrap();
    for ev in events.iter().cloned() {
        r.record(ev).unwrap();
    }
    r.flush().unwrap();
    r
}

/// A recorder in a temporary directory holding the [`workload`] of `n` events, and the
/// marked sequence numbers.
fn recorded_workload(n: u64) -> (tempfile::TempDir, PathBuf, Recorder, Vec<u64>) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    let (events, marked) = workload(n);
    let r = record(&dir, &events);
    (tmp, dir, r, marked)
}

fn reopen(dir: &Path) -> Recorder {
    Recorder::open(dir, Config::with_epoch_size(100)).unwrap()
}

fn q(r: &Recorder, text: &str) -> QueryResult {
    let query = Query::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    r.query(&query).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Every file under `dir` whose raw bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            hits.extend(files_containing(&p, needle));
        } else if contains(&std::fs::read(&p).unwrap(), needle) {
            hits.push(p);
        }
    }
    hits
}

/// Every key and value of every column family, read through RocksDB (so decompressed, and
/// including what is still only in the WAL), as (column family, key, value).
fn every_entry(db: &Path) -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let opts = rocksdb::Options::default();
    let cfs = rocksdb::DB::list_cf(&opts, db).unwrap();
    let raw = rocksdb::DB::open_cf_for_read_only(&opts, db, &cfs, false).unwrap();
    let mut out = Vec::new();
    for name in &cfs {
        let cf = raw.cf_handle(name).unwrap();
        for kv in raw.iterator_cf(cf, rocksdb::IteratorMode::Start) {
            let (k, v) = kv.unwrap();
            out.push((name.clone(), k.to_vec(), v.to_vec()));
        }
    }
    out
}

/// Asserts that no key or value of any column family, and no byte of any file under the
/// store, holds the marker; the lane (in the clear, in the records) is the positive control.
fn assert_no_plaintext_term(dir: &Path) {
    let db = dir.join(DB_DIR);
    let entries = every_entry(&db);
    let index: Vec<_> = entries
        .iter()
        .filter(|(cf, _, _)| cf == Column::Index.name())
        .collect();
    assert!(index.len() > 50, "the index is populated: {}", index.len());
    for (_, k, _) in &index {
        assert_eq!(
            k.len(),
            index::KEY_LEN,
            "every index key is tag ‖ mac ‖ epoch ‖ seq"
        );
        assert!((1..=12).contains(&k[0]), "field tag {}", k[0]);
    }
    for (cf, k, v) in &entries {
        for (path, value) in secrets() {
            assert!(
                !contains(k, value.as_bytes()) && !contains(v, value.as_bytes()),
                "{path} = {value:?} in plaintext in column family {cf}"
            );
        }
        assert!(
            !contains(k, MARKER.as_bytes()) && !contains(v, MARKER.as_bytes()),
            "the marker in plaintext in column family {cf}"
        );
    }
    assert!(
        entries
            .iter()
            .any(|(cf, _, v)| cf == "records" && contains(v, LANE.as_bytes())),
        "the scan must see plaintext where there is some"
    );
    assert_eq!(
        files_containing(&db, MARKER.as_bytes()),
        Vec::<PathBuf>::new()
    );
}

#[test]
fn the_store_holds_no_plaintext_index_term_in_any_column_family_or_file() {
    let (_tmp, dir, r, marked) = recorded_workload(400);
    // The index answers for every marked value.
    for (path, value) in secrets() {
        let res = q(&r, &format!("{path} = \"{value}\""));
        assert_eq!(res.matches, marked, "{path}");
        assert!(res.indexed, "{path} is answered from the index");
    }
    drop(r);
    // Closed with everything in the WAL (uncompressed): nothing there or in any CF.
    assert!(
        !files_containing(&dir.join(DB_DIR), LANE.as_bytes()).is_empty(),
        "the WAL holds the records in the clear, so a plaintext term would show too"
    );
    assert_no_plaintext_term(&dir);
    // Flushed to SST files, and after an erasure rewrote the index column family.
    let r = reopen(&dir);
    r.seal().unwrap();
    r.store().flush().unwrap();
    r.erase_epoch(1).unwrap();
    let res = q(&r, &format!("intent.tool = \"tool-{MARKER}\""));
    let kept: Vec<u64> = marked
        .iter()
        .copied()
        .filter(|s| !(100..200).contains(s))
        .collect();
    assert_eq!(res.matches, kept);
    drop(r);
    assert_no_plaintext_term(&dir);
}

#[test]
fn queries_through_the_blind_index_answer_as_a_scan_of_the_payloads_does() {
    let (_tmp, _dir, r, marked) = recorded_workload(600);
    r.seal().unwrap();
    r.erase_epoch(2).unwrap();
    let mut questions: Vec<String> = secrets()
        .into_iter()
        .map(|(path, value)| format!("{path} = \"{value}\""))
        .collect();
    questions.extend(
        [
            r#"intent.tool = "psql""#,
            r#"category = "retrieval""#,
            r#"policy_evaluation[].verdict = "escalate""#,
            r#"policy_evaluation[].verdict = "deny" and not intent.tool = "psql""#,
            r#"human_approval.approver = "nobody@nowhere.example""#,
            r#"context_provenance.environment = "staging" or code_provenance.agent = "coder""#,
            "delegation_provenance.parent_event.seq = 2",
            "descendants(2) or descendants(9)",
            "ancestors(401)",
            "influences(17)",
            "influenced_by(405)",
        ]
        .map(String::from),
    );
    questions.push(format!(
        "intent.tool = \"{}\" and seq < 300",
        "x".repeat(300)
    ));
    let indexed: Vec<QueryResult> = questions.iter().map(|t| q(&r, t)).collect();
    assert!(indexed[..8].iter().all(|res| res.indexed));
    assert_eq!(
        indexed[0].matches,
        marked
            .iter()
            .copied()
            .filter(|s| !(200..300).contains(s))
            .collect::<Vec<_>>()
    );
    assert!(!indexed[8].matches.is_empty() && !indexed[11].matches.is_empty());
    // With the watermark at 0 no event counts as indexed: every answer comes from the
    // decrypted payloads.
    r.store()
        .put_meta(index::META_INDEX_WATERMARK, &0u64.to_be_bytes())
        .unwrap();
    for (t, want) in questions.iter().zip(&indexed) {
        let scanned = q(&r, t);
        assert_eq!(scanned.matches, want.matches, "{t}");
        assert_eq!(scanned.unknown, want.unknown, "{t}");
        assert_eq!(scanned.notes, want.notes, "{t}");
    }
}

#[test]
fn an_index_of_the_plaintext_layout_leaves_no_file_when_the_store_is_upgraded() {
    let (_tmp, dir, r, marked) = recorded_workload(200);
    drop(r);
    // What a version-1 build wrote: tag ‖ u16be(len) ‖ value ‖ u64be(epoch) ‖ u64be(seq),
    // one batch pushed into an SST file and one left in the WAL.
    let store = Store::open(&dir.join(DB_DIR), false).unwrap();
    let v1 = |value: &str, seq: u64| {
        [
            &[1u8][..],
            &(value.len() as u16).to_be_bytes(),
            value.as_bytes(),
            &0u64.to_be_bytes(),
            &seq.to_be_bytes(),
        ]
        .concat()
    };
    let terms: Vec<Vec<u8>> = marked
        .iter()
        .map(|&seq| v1(&format!("tool-{MARKER}"), seq))
        .collect();
    let version = 1u64.to_be_bytes();
    let mut ops: Vec<RawOp<'_>> = terms
        .iter()
        .map(|t| RawOp::Put(Column::Index, t, &[]))
        .collect();
    ops.push(RawOp::Put(
        Column::Meta,
        index::META_INDEX_VERSION,
        &version,
    ));
    store.raw_write(&ops).unwrap();
    store.flush().unwrap();
    let wal = v1(&format!("wal-{MARKER}"), 3);
    store
        .raw_write(&[RawOp::Put(Column::Index, &wal, &[])])
        .unwrap();
    drop(store);
    assert!(
        !files_containing(&dir.join(DB_DIR), format!("wal-{MARKER}").as_bytes()).is_empty(),
        "the test must see the old plaintext terms on disk"
    );
    let r = reopen(&dir);
    assert_eq!(
        r.store().meta(index::META_INDEX_VERSION).unwrap(),
        Some(index::INDEX_VERSION.to_be_bytes().to_vec())
    );
    assert_eq!(index::watermark(r.store()).unwrap(), 200);
    let res = q(&r, &format!("intent.tool = \"tool-{MARKER}\""));
    assert!(res.indexed);
    assert_eq!(res.matches, marked);
    drop(r);
    // No file keeps them once the upgrading open returns: not an SST or WAL file (the old
    // index was compacted out) and not the MANIFEST (the store was opened again, which wrote a
    // fresh one naming only live files).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !files_containing(&dir.join(DB_DIR), MARKER.as_bytes()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "old plaintext terms still in {:?}",
            files_containing(&dir.join(DB_DIR), MARKER.as_bytes())
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_no_plaintext_term(&dir);
}
