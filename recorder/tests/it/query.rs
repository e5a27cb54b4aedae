//! Forensic queries on real stores: the incident, indexed lookups against a reference computed
//! from the submitted events, provenance relations, index catch-up and erasure.

use std::path::{Path, PathBuf};

use afr_core::{
    EventInput,
    event::{ContextProvenance, ContextSource, GuardrailVerdict},
};
use afr_recorder::{
    Config, Recorder, index, init,
    query::{Query, QueryResult},
};
use afr_testkit::synth;

fn store_with(events: &[EventInput], epoch_size: u64) -> (tempfile::TempDir, PathBuf, Recorder) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    init(&dir, [0x5a; 20]).unwrap();
    let r = Recorder::open(&dir, Config::buffered(epoch_size)).unwrap();
    for ev in events.iter().cloned() {
        r.record(ev).unwrap();
    }
    r.seal().unwrap();
    (tmp, dir, r)
}

fn q(r: &Recorder, text: &str) -> QueryResult {
    let query = Query::parse(text).unwrap_or_else(|e| panic!("{e}"));
    r.query(&query).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn seqs(r: &Recorder, text: &str) -> Vec<u64> {
    q(r, text).matches
}

pub fn incident() -> Vec<EventInput> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/incident.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| EventInput::from_json(l.as_bytes(), 1 << 20).unwrap())
        .collect()
}

#[test]
fn the_incident_questions_have_exact_answers() {
    let (_tmp, _dir, r) = store_with(&incident(), 100);
    // The destructive call that ran: it changed state, and it dropped a schema.
    assert_eq!(seqs(&r, r#"effects.state_changes ~ "dropped schema""#), [5]);
    assert_eq!(
        seqs(&r, r#"intent.args.sql ~ "DROP" and execution exists"#),
        [5]
    );
    // The guardrails that evaluated the drop when it was first attempted.
    assert_eq!(seqs(&r, r#"policy_evaluation[].verdict = "escalate""#), [2]);
    assert_eq!(
        seqs(
            &r,
            r#"policy_evaluation[].guardrail = "prod-host-denylist""#
        ),
        [2]
    );
    // Its delegation chain up to the root request, and who approved on the way.
    let up = q(&r, "ancestors(5)");
    assert_eq!(up.matches, [3, 4]);
    assert!(
        up.notes
            .iter()
            .any(|n| n.contains("root request is event 3")),
        "{:?}",
        up.notes
    );
    assert_eq!(seqs(&r, "ancestors(5) and human_approval exists"), [3]);
    assert_eq!(
        seqs(&r, r#"human_approval.approver = "j.doe@acme.example""#),
        [3]
    );
    assert_eq!(seqs(&r, "descendants(3)"), [4, 5]);
    // Believed staging, acted on production.
    assert_eq!(
        seqs(
            &r,
            r#"context_provenance.environment = "staging" and intent.args.host ~ "prod""#
        ),
        [2, 3]
    );
    assert_eq!(
        seqs(&r, r#"context_provenance.environment = "production""#),
        [5, 6]
    );
    assert_eq!(
        seqs(&r, r#"category = "database" and not seq in 0..3"#),
        [5]
    );
    assert_eq!(
        seqs(&r, r#"time >= "2026-11-29T08:01:00Z" and lane = "coder""#),
        [3, 4]
    );
    assert_eq!(seqs(&r, "all").len(), 7);
    // An equality on an indexed field reads no payload.
    let res = q(&r, r#"intent.tool = "psql""#);
    assert_eq!((res.matches.clone(), res.decrypted), (vec![2, 5], 0));
    assert!(res.indexed);
    // A bad event number is an error naming it.
    let e = r
        .query(&Query::parse("ancestors(70)").unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no event 70"), "{e}");
}

#[test]
fn indexed_lookups_and_full_scans_agree_with_the_submitted_events() {
    let events = synth::generate(1_500, 17);
    let (_tmp, _dir, r) = store_with(&events, 64);
    let reference = |f: &dyn Fn(&EventInput) -> bool| -> Vec<u64> {
        (0..events.len() as u64)
            .filter(|s| f(&events[*s as usize]))
            .collect()
    };
    for tool in ["psql", "bash", "read_file", "delegate_task", "no-such-tool"] {
        let want = reference(&|e| e.intent.tool == tool);
        let indexed = q(&r, &format!("intent.tool = {tool:?}"));
        assert!(indexed.indexed && indexed.decrypted == 0);
        assert_eq!(indexed.matches, want, "{tool}");
        // The same question the index cannot answer: a full scan, decrypting every payload.
        let scanned = q(
            &r,
            &format!("intent.tool >= {tool:?} and intent.tool <= {tool:?}"),
        );
        assert!(!scanned.indexed);
        assert_eq!(scanned.decrypted, 1_500);
        assert_eq!(scanned.matches, want, "{tool} by scan");
    }
    let want = reference(&|e| {
        e.policy_evaluation
            .iter()
            .any(|g| g.verdict == GuardrailVerdict::Escalate)
    });
    assert!(!want.is_empty());
    assert_eq!(
        seqs(&r, r#"policy_evaluation[].verdict = "escalate""#),
        want
    );
    let want = reference(&|e| {
        e.context_provenance
            .as_ref()
            .and_then(|c| c.environment.as_deref())
            == Some("production")
            && e.human_approval.is_some()
    });
    assert_eq!(
        seqs(
            &r,
            r#"context_provenance.environment = "production" and human_approval.approver = "oncall@acme-corp.example""#
        ),
        want
    );
    let want = reference(&|e| {
        e.context_provenance
            .as_ref()
            .is_some_and(|c| c.sources.iter().any(|s| s.uri.contains("runbooks/4")))
    });
    assert_eq!(
        seqs(&r, r#"context_provenance.sources[].uri ~ "runbooks/4""#),
        want
    );
    // Delegation: children by the index, descendants across organisations.
    let parent_of = |e: &EventInput| {
        e.delegation_provenance
            .as_ref()
            .and_then(|d| d.parent_event.as_ref())
            .map(|p| p.seq)
    };
    let root = (0..1_500u64)
        .filter(|s| events.iter().filter(|e| parent_of(e) == Some(*s)).count() >= 3)
        .find(|s| {
            let orgs: std::collections::BTreeSet<_> = events
                .iter()
                .filter(|e| parent_of(e) == Some(*s))
                .filter_map(|e| e.delegation_provenance.as_ref()?.organisation.clone())
                .collect();
            orgs.len() >= 2
        })
        .expect("a delegation with children in two organisations");
    let kids = reference(&|e| parent_of(e) == Some(root));
    assert_eq!(seqs(&r, &format!("descendants({root})")), kids);
    assert_eq!(
        seqs(
            &r,
            &format!("delegation_provenance.parent_event.seq = {root}")
        ),
        kids
    );
    for k in &kids {
        assert_eq!(seqs(&r, &format!("ancestors({k})")), [root]);
    }
    // Boolean structure, checked against the reference.
    let want = reference(&|e| {
        (e.intent.tool == "psql" || e.intent.tool == "bash")
            && e.human_approval.is_none()
            && e.effects.as_ref().is_some_and(|f| f.error.is_some())
    });
    assert_eq!(
        seqs(
            &r,
            r#"(intent.tool = "psql" or intent.tool = "bash") and not human_approval exists and effects.error exists"#
        ),
        want
    );
    assert_eq!(
        seqs(&r, r#"seq in 100..110 and category != "file""#),
        (100..110u64)
            .filter(|s| events[*s as usize].category != afr_core::Category::File)
            .collect::<Vec<_>>()
    );
}

fn sourced(tool: &str, sources: &[(&str, Option<&str>)]) -> EventInput {
    let mut e = synth::generate(1, 1).remove(0);
    e.intent.tool = tool.into();
    e.concurrent_with.clear();
    e.delegation_provenance = None;
    e.context_provenance = Some(ContextProvenance {
        sources: sources
            .iter()
            .map(|(uri, h)| ContextSource {
                uri: (*uri).into(),
                content_hash: h.map(Into::into),
                kind: Some("web".into()),
            })
            .collect(),
        environment: Some("production".into()),
    });
    e
}

#[test]
fn influence_follows_content_to_where_it_entered() {
    let w = "https://wiki.partner.example/setup";
    let events = vec![
        sourced("web_fetch", &[(w, Some("sha256:aa"))]), // 0: brings the page in
        sourced("bash", &[(w, Some("sha256:aa"))]),      // 1: acts on it
        sourced("web_fetch", &[(w, Some("sha256:bb"))]), // 2: the page changed since
        sourced("http_request", &[(w, Some("sha256:aa"))]), // 3: acts on the first version
        sourced("notify", &[("afr:event/1", None)]),     // 4: uses event 1's output
        sourced("bash", &[(w, None)]),                   // 5: cites the page without a hash
        sourced("ls", &[]),                              // 6
    ];
    let (_tmp, _dir, r) = store_with(&events, 4);
    assert_eq!(seqs(&r, "influences(3)"), [0]);
    assert_eq!(seqs(&r, "influences(1)"), [0]);
    assert_eq!(seqs(&r, "influenced_by(0)"), [1, 3]);
    assert_eq!(seqs(&r, "influences(4)"), [1]);
    assert_eq!(seqs(&r, "influenced_by(1)"), [4]);
    assert_eq!(seqs(&r, "influences(5)"), [0]);
    assert_eq!(seqs(&r, "influenced_by(2)"), Vec::<u64>::new());
    assert_eq!(seqs(&r, "influences(0)"), Vec::<u64>::new());
    assert_eq!(seqs(&r, "influences(6)"), Vec::<u64>::new());
    assert_eq!(
        seqs(&r, r#"influenced_by(0) and intent.tool = "http_request""#),
        [3]
    );
}

#[test]
fn the_index_catches_up_from_its_watermark_and_answers_are_never_stale() {
    let events = synth::generate(700, 23);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("afr");
    init(&dir, [0x77; 20]).unwrap();
    let questions = [
        r#"intent.tool = "psql""#,
        r#"policy_evaluation[].verdict = "escalate" and context_provenance.environment = "staging""#,
        "descendants(7) or descendants(17)",
        r#"category = "retrieval""#,
    ];
    let want: Vec<Vec<u64>> = {
        let r = Recorder::open(&dir, Config::default()).unwrap();
        for ev in events.iter().cloned() {
            r.record(ev).unwrap();
        }
        r.flush().unwrap();
        assert_eq!(index::watermark(r.store()).unwrap(), 700);
        let want: Vec<_> = questions.iter().map(|t| seqs(&r, t)).collect();
        assert!(want.iter().all(|w| !w.is_empty()), "{want:?}");
        // The index lags (as after a crash of an older build): the tail is examined directly.
        r.store()
            .put_meta(index::META_INDEX_WATERMARK, &500u64.to_be_bytes())
            .unwrap();
        for (t, w) in questions.iter().zip(&want) {
            assert_eq!(&seqs(&r, t), w, "{t} with a lagging index");
        }
        // An index of another version is rebuilt on the next open.
        r.store()
            .put_meta(index::META_INDEX_VERSION, &0u64.to_be_bytes())
            .unwrap();
        want
    };
    let r = Recorder::open(&dir, Config::default()).unwrap();
    assert_eq!(index::watermark(r.store()).unwrap(), 700);
    for (t, w) in questions.iter().zip(&want) {
        let res = q(&r, t);
        assert_eq!(&res.matches, w, "{t} after the rebuild");
    }
    assert_eq!(
        index::indexed_seqs(r.store()).unwrap(),
        (0..700).collect::<Vec<_>>()
    );
    // Only the watermark lags: events 300.. are indexed again, grouped differently, and
    // lookups still return each event once.
    r.store()
        .put_meta(index::META_INDEX_WATERMARK, &300u64.to_be_bytes())
        .unwrap();
    drop(r);
    let r = Recorder::open(&dir, Config::default()).unwrap();
    assert_eq!(index::watermark(r.store()).unwrap(), 700);
    for (t, w) in questions.iter().zip(&want) {
        assert_eq!(&seqs(&r, t), w, "{t} after a partial catch-up");
    }
}

#[test]
fn erased_epochs_are_reported_not_matched_and_leave_no_index_terms() {
    let mut events = synth::generate(300, 29);
    for e in &mut events[100..200] {
        e.concurrent_with.clear();
    }
    let (_tmp, _dir, r) = store_with(&events, 100);
    let before = seqs(&r, r#"intent.tool = "psql""#);
    assert!(before.iter().any(|s| (100..200).contains(s)));
    r.erase_epoch(1).unwrap();
    let indexed = index::indexed_seqs(r.store()).unwrap();
    assert!(
        !indexed.iter().any(|s| (100..200).contains(s)),
        "index terms of the erased epoch remain"
    );
    assert!(indexed.iter().any(|s| (200..300).contains(s)));
    // Payload predicates: erased events are unknown, never matches.
    let res = q(&r, r#"intent.tool = "psql""#);
    assert_eq!(
        res.matches,
        before
            .iter()
            .copied()
            .filter(|s| !(100..200).contains(s))
            .collect::<Vec<_>>()
    );
    assert_eq!(res.unknown, (100..200).collect::<Vec<_>>());
    assert_eq!(res.erased_epochs, [1]);
    let res = q(&r, r#"not intent.tool = "psql" and seq in 95..105"#);
    assert_eq!(res.unknown, (100..105).collect::<Vec<_>>());
    assert!(res.matches.iter().all(|s| *s < 100));
    // Envelope fields still answer, from the record.
    let res = q(&r, r#"seq in 150..153 and category = "shell""#);
    assert!(res.unknown.is_empty());
    assert_eq!(
        res.matches,
        (150..153u64)
            .filter(|s| events[*s as usize].category == afr_core::Category::Shell)
            .collect::<Vec<_>>()
    );
    // Full scans and relations pass over erased events without failing.
    let res = q(&r, r#"intent.args.input ~ "pytest""#);
    assert!(!res.unknown.is_empty() && !res.matches.is_empty());
    // A relation cannot look inside erased payloads: their events are unknown members, so
    // neither the relation nor its negation matches them.
    let root = (0..100u64)
        .find(|s| {
            events[*s as usize + 1..].iter().any(|e| {
                e.delegation_provenance
                    .as_ref()
                    .and_then(|d| d.parent_event.as_ref())
                    .is_some_and(|p| p.seq == *s)
            })
        })
        .expect("the workload has a delegation root in epoch 0");
    for text in [
        format!("descendants({root})"),
        format!("not descendants({root})"),
    ] {
        let res = q(&r, &text);
        assert!(
            !res.matches.iter().any(|s| (100..200).contains(s)),
            "{text} matched erased events"
        );
        assert_eq!(res.unknown, (100..200).collect::<Vec<_>>(), "{text}");
    }
    let loaded = r.load_events(&[150]).next().unwrap().unwrap();
    assert!(loaded.payload.is_none() && loaded.event_json().is_none());
}

#[test]
fn open_ended_seq_ranges_and_deep_nesting_are_answered_or_refused_not_fatal() {
    let (_tmp, _dir, r) = store_with(&incident(), 100);
    // Open-ended ranges combined with `or` are clipped to the log, never expanded to u64::MAX.
    assert_eq!(
        seqs(&r, r#"seq > 4 or intent.tool = "read_file""#),
        [0, 5, 6]
    );
    assert_eq!(seqs(&r, "seq < 1 or seq >= 6"), [0, 6]);
    assert_eq!(
        seqs(&r, r#"seq < 1000000000000 or intent.tool = "psql""#),
        [0, 1, 2, 3, 4, 5, 6]
    );
    assert_eq!(
        seqs(&r, "seq in 5..=18446744073709551615 or seq = 0"),
        [0, 5, 6]
    );
    // Nesting is bounded: deep enough is fine, deeper is a parse error pointing at the token.
    let ok = format!(
        "{}all{}",
        "(".repeat(afr_recorder::query::MAX_DEPTH),
        ")".repeat(afr_recorder::query::MAX_DEPTH)
    );
    assert_eq!(seqs(&r, &ok).len(), 7);
    for deep in [
        format!("{}all", "not ".repeat(20_000)),
        format!("{}all{}", "(".repeat(100_000), ")".repeat(100_000)),
    ] {
        let e = Query::parse(&deep).unwrap_err().to_string();
        assert!(e.contains("nested more than"), "{e}");
    }
}
