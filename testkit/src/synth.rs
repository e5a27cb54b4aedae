//! The synthetic workload of the paper's evaluation: seeded tool calls across every category.
//!
//! About 15% of events run concurrently (a lane and the earlier events they overlapped with),
//! every tenth starts a delegation chain whose children point at their parent event, guarded
//! categories carry guardrail evaluations, destructive ones a human approval, and every event
//! carries context provenance with an environment. The same seed gives the same events.

use afr_core::{
    Category, EventInput,
    event::{
        CodeProvenance, ContextProvenance, ContextSource, Decision, DelegationProvenance, Effects,
        EventRef, Execution, GuardrailEvaluation, GuardrailVerdict, HumanApproval, Intent,
    },
};
use rand::{RngExt, SeedableRng, rngs::StdRng};
use serde_json::json;

/// Default seed.
pub const DEFAULT_SEED: u64 = 42;

const TOOLS: [(&str, Category, &str); 9] = [
    ("read_file", Category::File, "src/app/config.yaml"),
    ("bash", Category::Shell, "pytest -q tests/test_api.py"),
    (
        "http_request",
        Category::Api,
        "POST https://api.example.com/v2/orders",
    ),
    (
        "psql",
        Category::Database,
        "UPDATE accounts SET tier = 'gold' WHERE id = 4521",
    ),
    (
        "vector_search",
        Category::Retrieval,
        "runbook: rotate credentials",
    ),
    (
        "apply_patch",
        Category::Code,
        "--- a/src/handler.py +++ b/src/handler.py",
    ),
    (
        "request_approval",
        Category::Approval,
        "approve deploy of build 1842",
    ),
    (
        "delegate_task",
        Category::Delegation,
        "subagent: migrate schema v41",
    ),
    ("notify", Category::Other, "slack #ops: deploy finished"),
];

const ENVS: [&str; 3] = ["production", "staging", "development"];
const AGENTS: [&str; 4] = ["planner", "coder", "db-agent", "reviewer"];
const ORGS: [&str; 3] = ["acme-corp", "globex", "initech"];

/// Generates `n` events from `seed`, numbered as if recorded from sequence number 0.
pub fn generate(n: u64, seed: u64) -> Vec<EventInput> {
    stream(seed).take(n as usize).collect()
}

/// The same workload as an endless iterator: one event at a time, so a benchmark of ten
/// million events never holds them all. `stream(s).take(n)` yields `generate(n, s)`.
pub fn stream(seed: u64) -> Stream {
    Stream {
        rng: StdRng::seed_from_u64(seed),
        next: 0,
        delegation_parent: None,
    }
}

/// The iterator of [`stream`].
#[derive(Debug)]
pub struct Stream {
    rng: StdRng,
    next: u64,
    delegation_parent: Option<u64>,
}

impl Iterator for Stream {
    type Item = EventInput;

    fn next(&mut self) -> Option<EventInput> {
        let i = self.next;
        self.next += 1;
        Some(self.event(i))
    }
}

impl Stream {
    fn event(&mut self, i: u64) -> EventInput {
        let rng = &mut self.rng;
        let base_ts = 1_767_225_600_000_000u64; // 2026-01-01T00:00:00Z
        let (tool, category, command) = TOOLS[rng.random_range(0..TOOLS.len())];
        let env = ENVS[rng.random_range(0..ENVS.len())];
        let agent = AGENTS[rng.random_range(0..AGENTS.len())];
        let concurrent = i > 0 && rng.random_bool(0.15);
        let (lane, concurrent_with) = if concurrent {
            let mut w = vec![i - 1];
            if i > 1 && rng.random_bool(0.3) {
                w.insert(0, i - 2);
            }
            (Some(format!("task-{}", rng.random_range(1..6))), w)
        } else {
            (None, Vec::new())
        };
        if category == Category::Delegation {
            self.delegation_parent = Some(i);
        }
        let guarded = matches!(
            category,
            Category::Shell | Category::Database | Category::Api | Category::Code
        );
        let destructive = guarded && rng.random_bool(0.2);
        let policy_evaluation = if guarded {
            vec![GuardrailEvaluation {
                guardrail: format!("{}-policy", category.name()),
                version: Some("1.4".into()),
                verdict: if destructive {
                    GuardrailVerdict::Escalate
                } else {
                    GuardrailVerdict::Allow
                },
                reason: destructive.then(|| "mutating action on shared state".to_owned()),
            }]
        } else {
            Vec::new()
        };
        let human_approval = destructive.then(|| HumanApproval {
            approver: "oncall@acme-corp.example".into(),
            prompt: format!("Allow {tool} in {env}?"),
            decision: Decision::Approved,
            decided_at_us: base_ts + i * 1_000_000 + 500_000,
            signature: None,
        });
        let delegation_provenance = match self.delegation_parent {
            Some(p) if p != i && rng.random_bool(0.5) => Some(DelegationProvenance {
                parent_event: Some(EventRef::same_log(p)),
                delegating_agent: Some("planner".into()),
                organisation: Some(ORGS[rng.random_range(0..ORGS.len())].into()),
                on_behalf_of: None,
                delegated_to: Vec::new(),
            }),
            _ => None,
        };
        let ok = rng.random_bool(0.93);
        EventInput {
            category,
            timestamp_us: Some(base_ts + i * 1_000_000),
            lane,
            concurrent_with,
            intent: Intent {
                tool: tool.into(),
                args: json!({ "input": command, "step": i }),
            },
            policy_evaluation,
            human_approval,
            execution: Some(Execution {
                command: command.into(),
                target: Some(format!("{env}-cluster")),
                mutation: serde_json::Value::Null,
            }),
            effects: Some(Effects {
                return_value: if ok {
                    json!({ "status": 0 })
                } else {
                    serde_json::Value::Null
                },
                state_changes: Vec::new(),
                external_response: serde_json::Value::Null,
                error: (!ok).then(|| "exit status 1".to_owned()),
            }),
            context_provenance: Some(ContextProvenance {
                sources: if category == Category::Retrieval {
                    vec![ContextSource {
                        uri: format!("kb://runbooks/{}", rng.random_range(1..500)),
                        content_hash: None,
                        kind: Some("retrieval".into()),
                    }]
                } else {
                    Vec::new()
                },
                environment: Some(env.into()),
            }),
            code_provenance: Some(CodeProvenance {
                agent: Some(agent.into()),
                model: Some("model-2026-10".into()),
                ..CodeProvenance::default()
            }),
            delegation_provenance,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workload_is_seeded_and_realistic() {
        let a = generate(2000, 42);
        assert_eq!(a, generate(2000, 42));
        assert_ne!(a, generate(2000, 43));
        let concurrent = a.iter().filter(|e| !e.concurrent_with.is_empty()).count();
        assert!(
            (200..400).contains(&concurrent),
            "{concurrent} concurrent of 2000"
        );
        for c in Category::ALL {
            assert!(a.iter().any(|e| e.category == c), "no {c:?}");
        }
        assert!(a.iter().any(|e| e.human_approval.is_some()));
        assert!(a.iter().any(|e| e.delegation_provenance.is_some()));
        assert!(a.iter().all(|e| {
            e.context_provenance
                .as_ref()
                .is_some_and(|c| c.environment.is_some())
        }));
        for e in &a {
            e.validate().unwrap();
        }
    }
}
