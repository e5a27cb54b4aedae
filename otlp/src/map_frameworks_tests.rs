//! The mapping of real frameworks' spans: `otlp/tests/data/frameworks/*.json` are every span of
//! one run of each of tests/frameworks/'s scripts (LangGraph under both LangChain
//! instrumentations, smolagents, openai-agents with a handoff), as one OTLP/JSON export each,
//! verbatim (written by the scripts' `--dump`). tests/frameworks/test_frameworks.py runs the
//! same scripts against a real `afr otlp`.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, reason = "tests")]

use super::*;

/// The events of one captured run, by tool name (`handoff` for a handoff), in export order.
fn events(name: &str) -> Vec<serde_json::Value> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/data/frameworks/{name}.json"));
    let req: ExportTraceServiceRequest =
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
    let (events, summary) = map(&req);
    assert_eq!(summary.malformed, 0);
    events
        .into_iter()
        .map(|e| {
            let v = serde_json::to_value(&e.event).unwrap();
            afr_core::EventInput::from_json(
                &serde_json::to_vec(&v).unwrap(),
                afr_core::event::DEFAULT_MAX_EVENT_BYTES,
            )
            .unwrap()
            .validate()
            .unwrap();
            v
        })
        .collect()
}

fn tool<'a>(events: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
    events
        .iter()
        .find(|e| e["intent"]["tool"] == name)
        .unwrap_or_else(|| panic!("no {name} event in {events:#?}"))
}

fn delegator(e: &serde_json::Value) -> &serde_json::Value {
    &e["delegation_provenance"]["delegating_agent"]
}

#[test]
fn langgraph_under_openinference() {
    let ev = events("langgraph-openinference");
    assert_eq!(ev.len(), 3, "{ev:#?}");
    let search = tool(&ev, "search");
    assert_eq!(
        search["intent"]["args"],
        json!({"query": "OTLP retry semantics", "limit": 2})
    );
    // The ReAct agent run as a subgraph node: named by its checkpoint namespace.
    assert_eq!(search["code_provenance"]["agent"], "researcher");
    assert_eq!(search["lane"], "conv-sess-lg-1");
    assert_eq!(
        search["effects"]["return_value"],
        json!([
            "hit 0 for OTLP retry semantics",
            "hit 1 for OTLP retry semantics"
        ])
    );
    assert!(search["effects"].get("error").is_none(), "{search}");
    // A one-argument tool's span holds the bare string: the ToolNode task has the call.
    let fetch = tool(&ev, "fetch_page");
    assert_eq!(
        fetch["intent"]["args"],
        json!({"url": "https://example.invalid/private"})
    );
    assert_eq!(
        fetch["effects"]["error"],
        "the tool reported an error: 403 Forbidden: https://example.invalid/private"
    );
    let sources = fetch["context_provenance"]["sources"].to_string();
    assert!(sources.contains("tool_call:call_fetch_1"), "{sources}");
    // LangChain's create_agent: `lc_agent_name` in the metadata JSON.
    let note = tool(&ev, "save_note");
    assert_eq!(note["code_provenance"]["agent"], "writer");
    assert_eq!(
        note["intent"]["args"],
        json!({"title": "retries", "body": "OTLP: retry 429/503"})
    );
    for e in &ev {
        assert!(
            delegator(e).is_null(),
            "no agent above the team's nodes: {e}"
        );
    }
}

#[test]
fn langgraph_under_openllmetry() {
    let ev = events("langgraph-openllmetry");
    assert_eq!(ev.len(), 3, "{ev:#?}");
    // The tool span carries no arguments: they come from the ToolNode task's tool call.
    let search = tool(&ev, "search");
    assert_eq!(
        search["intent"]["args"],
        json!({"query": "OTLP retry semantics", "limit": 2})
    );
    assert_eq!(search["code_provenance"]["agent"], "researcher");
    assert_eq!(search["lane"], "conv-sess-lg-1");
    assert_eq!(
        search["effects"]["return_value"],
        json!([
            "hit 0 for OTLP retry semantics",
            "hit 1 for OTLP retry semantics"
        ])
    );
    let fetch = tool(&ev, "fetch_page");
    assert_eq!(
        fetch["intent"]["args"],
        json!({"url": "https://example.invalid/private"})
    );
    assert_eq!(
        fetch["effects"]["error"],
        "the tool reported an error: 403 Forbidden: https://example.invalid/private"
    );
    let note = tool(&ev, "save_note");
    assert_eq!(note["code_provenance"]["agent"], "writer");
    // OpenLLMetry makes the parent graph an agent (`invoke_agent team`): it delegated.
    for e in &ev {
        assert_eq!(delegator(e), "team", "{e}");
    }
}

#[test]
fn smolagents_under_openinference() {
    let ev = events("smolagents-openinference");
    let search = tool(&ev, "search_docs");
    assert_eq!(
        search["intent"]["args"],
        json!({"query": "OTLP retry", "limit": 2})
    );
    // The agent span is `researcher.run`, with no agent.name.
    assert_eq!(search["code_provenance"]["agent"], "researcher");
    assert_eq!(delegator(search), "manager");
    assert_eq!(search["code_provenance"]["model"], "scripted-model");
    assert_eq!(search["lane"], "conv-sess-sm-1");
    let read = tool(&ev, "read_file");
    assert_eq!(read["intent"]["args"], json!({"path": "/etc/secret"}));
    assert_eq!(
        read["effects"]["error"],
        "PermissionError: permission denied: /etc/secret"
    );
    let finals: Vec<_> = ev
        .iter()
        .filter(|e| e["intent"]["tool"] == "final_answer")
        .collect();
    assert_eq!(finals.len(), 2);
    let manager_final = finals
        .iter()
        .find(|e| e["code_provenance"]["agent"] == "manager")
        .unwrap();
    assert!(delegator(manager_final).is_null(), "{manager_final}");
}

#[test]
fn openai_agents_under_openinference() {
    let ev = events("openai-agents-openinference");
    assert_eq!(ev.len(), 3, "{ev:#?}");
    let lookup = tool(&ev, "lookup_order");
    assert_eq!(lookup["intent"]["args"], json!({"order_id": "A-17"}));
    assert_eq!(lookup["code_provenance"]["agent"], "triage");
    assert!(delegator(lookup).is_null(), "{lookup}");
    assert_eq!(lookup["lane"], "conv-sess-oa-1");
    // The handoff: a TOOL span `handoff to billing`, no tool.name, input the agent handing off.
    let handoff = tool(&ev, "handoff");
    assert_eq!(handoff["category"], "delegation");
    assert_eq!(handoff["intent"]["args"], json!({"to": "billing"}));
    assert_eq!(handoff["code_provenance"]["agent"], "triage");
    assert_eq!(delegator(handoff), "triage");
    // The agent that took over: a sibling of triage, `graph.node.parent_id = triage`.
    let refund = tool(&ev, "refund");
    assert_eq!(
        refund["intent"]["args"],
        json!({"order_id": "A-17", "amount": 12.5})
    );
    assert_eq!(refund["code_provenance"]["agent"], "billing");
    assert_eq!(delegator(refund), "triage");
    assert!(
        refund["effects"]["error"]
            .as_str()
            .unwrap()
            .starts_with("Error running tool (non-fatal)"),
        "{refund}"
    );
    for e in &ev {
        if e["intent"]["tool"] != "handoff" {
            assert_ne!(
                delegator(e),
                &e["code_provenance"]["agent"],
                "self-delegation: {e}"
            );
        }
    }
}
