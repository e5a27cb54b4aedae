//! `docs/event.schema.json` against the Rust parser of `EventInput`.
//!
//! Two checks, both driven by the parser itself rather than by a hand-kept list:
//! 1. serde's own field and variant lists (captured by a probe deserializer that records what
//!    the derived `Deserialize` asks for) equal the schema's `properties` and `enum`s, def by def;
//! 2. a maximal event, and several hundred variations of it (each key removed, set to null,
//!    given a wrong type or out-of-range value, an unknown key added at every depth, every enum
//!    value tried), are accepted by `EventInput::from_json` exactly when a small validator for
//!    the schema keywords used here accepts them. This settles `required`, nullability,
//!    `additionalProperties: false` and the limits.

use std::collections::BTreeSet;

use afr_core::{
    event::{
        ApprovalSignature, CodeProvenance, ContextProvenance, ContextSource,
        DEFAULT_MAX_EVENT_BYTES, Decision, DelegationProvenance, Effects, EventInput, EventRef,
        Execution, GuardrailEvaluation, GuardrailVerdict, HumanApproval, Intent, OfferRef,
    },
    record::Category,
};
use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde_json::{Value, json};

use crate::{read, workspace_dir};

fn schema() -> Value {
    serde_json::from_slice(&read(&workspace_dir().join("docs/event.schema.json"))).unwrap()
}

// ---- 1. serde's field lists ------------------------------------------------------------

/// What a derived `Deserialize` asked the probe for.
#[derive(Debug)]
struct Shape {
    name: &'static str,
    /// Field names of a struct, variant names of an enum (after renaming).
    names: &'static [&'static str],
    is_enum: bool,
}

#[derive(Debug)]
struct Caught(Option<Shape>);

impl std::fmt::Display for Caught {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "probe: {:?}", self.0)
    }
}

impl std::error::Error for Caught {}

impl de::Error for Caught {
    fn custom<T: std::fmt::Display>(_: T) -> Caught {
        Caught(None)
    }
}

/// A deserializer that answers every request with an error carrying the request's shape.
struct Probe;

impl<'de> Deserializer<'de> for Probe {
    type Error = Caught;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Caught> {
        Err(Caught(None))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Caught> {
        Err(Caught(Some(Shape {
            name,
            names: fields,
            is_enum: false,
        })))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Caught> {
        Err(Caught(Some(Shape {
            name,
            names: variants,
            is_enum: true,
        })))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map identifier ignored_any
    }
}

fn shape<'de, T: Deserialize<'de>>() -> Shape {
    match T::deserialize(Probe) {
        Err(Caught(Some(s))) => s,
        other => panic!(
            "{} is not a struct or enum to serde: {:?}",
            std::any::type_name::<T>(),
            other.err()
        ),
    }
}

fn set(v: &Value) -> BTreeSet<String> {
    match v {
        Value::Object(m) => m.keys().cloned().collect(),
        Value::Array(a) => a.iter().map(|s| s.as_str().unwrap().to_owned()).collect(),
        other => panic!("not an object or array: {other}"),
    }
}

#[test]
fn schema_defs_have_serdes_fields_and_variants() {
    let s = schema();
    assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(s["$ref"], "#/$defs/EventInput");
    let shapes = [
        shape::<EventInput>(),
        shape::<Category>(),
        shape::<Intent>(),
        shape::<GuardrailEvaluation>(),
        shape::<GuardrailVerdict>(),
        shape::<HumanApproval>(),
        shape::<Decision>(),
        shape::<ApprovalSignature>(),
        shape::<afr_core::approval::Statement>(),
        shape::<Execution>(),
        shape::<Effects>(),
        shape::<ContextProvenance>(),
        shape::<ContextSource>(),
        shape::<CodeProvenance>(),
        shape::<afr_core::event::Capture>(),
        shape::<afr_core::event::CaptureStrength>(),
        shape::<DelegationProvenance>(),
        shape::<EventRef>(),
        shape::<OfferRef>(),
    ];
    let defs = &s["$defs"];
    for sh in &shapes {
        let def = &defs[sh.name];
        assert!(def.is_object(), "schema has no $defs/{}", sh.name);
        let serde_names: BTreeSet<String> = sh.names.iter().map(|n| n.to_string()).collect();
        if sh.is_enum {
            assert_eq!(set(&def["enum"]), serde_names, "variants of {}", sh.name);
        } else {
            assert_eq!(def["type"], "object", "{}", sh.name);
            assert_eq!(def["additionalProperties"], false, "{}", sh.name);
            assert_eq!(
                set(&def["properties"]),
                serde_names,
                "properties of {}",
                sh.name
            );
            assert!(
                set(&def["required"]).is_subset(&serde_names),
                "required of {}",
                sh.name
            );
        }
    }
    // Every def is one of those types, or the shared integer type.
    let covered: BTreeSet<String> = shapes
        .iter()
        .map(|s| s.name.to_owned())
        .chain(["Uint64".to_owned()])
        .collect();
    assert_eq!(set(defs), covered);
    // Category's wire order is the schema's order.
    let names: Vec<&str> = Category::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(defs["Category"]["enum"], json!(names));
}

// ---- 2. same verdicts on variations of a maximal event --------------------------------

/// Every property of every object in the schema is present.
fn maximal() -> Value {
    json!({
        "category": "database",
        "timestamp_us": 1_767_225_600_000_000u64,
        "lane": "task-3",
        "concurrent_with": [1, 2],
        "intent": { "tool": "psql", "args": { "db": "prod", "sql": "DROP TABLE users" } },
        "policy_evaluation": [{ "guardrail": "g", "version": "2", "verdict": "escalate", "reason": "r" }],
        "human_approval": {
            "approver": "alice@example.com", "prompt": "Drop?", "decision": "approved", "decided_at_us": 9,
            "signature": {
                "scheme": "ssh", "signer": "ssh-ed25519 AAAA", "signature": "11",
                "statement": {
                    "action": "00", "tool": "psql", "target": "db", "decision": "approved",
                    "recorder": "0x00", "issued_at": 1, "expires_at": 2, "nonce": "22"
                }
            }
        },
        "execution": { "command": "DROP TABLE users", "target": "db", "mutation": { "x": [1, 2.5, null] } },
        "effects": { "return_value": { "rows": 0 }, "state_changes": ["s"], "external_response": "ok", "error": "e" },
        "context_provenance": { "sources": [{ "uri": "u", "content_hash": "sha256:00", "kind": "web" }], "environment": "prod" },
        "code_provenance": { "agent": "a", "agent_version": "1", "tool_version": "2", "repository": "r", "commit": "c", "model": "m", "capture": { "strength": "inline", "via": "hook:codex" } },
        "delegation_provenance": {
            "parent_event": {
                "recorder": "0x00000000000000000000000000000000000aF2Af", "seq": 3,
                "leaf_hash": "ab".repeat(32), "signature": format!("0x{}", "cd".repeat(65)),
                "to": "0x00000000000000000000000000000000000bF2Bf"
            },
            "delegating_agent": "d", "organisation": "o", "on_behalf_of": "b",
            "delegated_to": [{ "recorder": "0x00000000000000000000000000000000000aF2Af", "seq": 4,
                "answers": { "recorder": "0x00000000000000000000000000000000000bF2Bf", "seq": 1, "leaf_hash": "ef".repeat(32) } }]
        }
    })
}

/// A validator for the keywords this schema uses; panics on any other keyword, so the schema
/// cannot grow a constraint that is silently not checked here.
struct Validator<'a> {
    defs: &'a Value,
}

impl Validator<'_> {
    fn valid(&self, schema: &Value, v: &Value) -> bool {
        let Value::Object(kw) = schema else {
            panic!("schema is not an object: {schema}")
        };
        kw.iter().all(|(k, arg)| match k.as_str() {
            "description" | "title" | "$schema" | "$id" | "$defs" => true,
            "$ref" => {
                let name = arg.as_str().unwrap().strip_prefix("#/$defs/").unwrap();
                self.valid(&self.defs[name], v)
            }
            "anyOf" => arg.as_array().unwrap().iter().any(|s| self.valid(s, v)),
            "type" => match arg {
                Value::String(t) => type_ok(t, v),
                Value::Array(ts) => ts.iter().any(|t| type_ok(t.as_str().unwrap(), v)),
                _ => panic!("bad type {arg}"),
            },
            "enum" => arg.as_array().unwrap().contains(v),
            "properties" => v.as_object().is_none_or(|o| {
                o.iter()
                    .all(|(name, x)| arg.get(name).is_none_or(|s| self.valid(s, x)))
            }),
            "additionalProperties" => {
                assert_eq!(arg, &Value::Bool(false));
                v.as_object()
                    .is_none_or(|o| o.keys().all(|name| kw["properties"].get(name).is_some()))
            }
            "required" => v
                .as_object()
                .is_none_or(|o| set(arg).iter().all(|r| o.contains_key(r))),
            "items" => v
                .as_array()
                .is_none_or(|a| a.iter().all(|x| self.valid(arg, x))),
            "maxItems" => v
                .as_array()
                .is_none_or(|a| a.len() as u64 <= arg.as_u64().unwrap()),
            "uniqueItems" => v
                .as_array()
                .is_none_or(|a| a.iter().enumerate().all(|(i, x)| !a[..i].contains(x))),
            "minLength" => v
                .as_str()
                .is_none_or(|s| s.chars().count() as u64 >= arg.as_u64().unwrap()),
            "maxLength" => v
                .as_str()
                .is_none_or(|s| s.chars().count() as u64 <= arg.as_u64().unwrap()),
            "minimum" => as_i128(v).is_none_or(|n| n >= as_i128(arg).unwrap()),
            "maximum" => as_i128(v).is_none_or(|n| n <= as_i128(arg).unwrap()),
            "pattern" => {
                // The schema's three patterns: hex of a length, with a required, optional or
                // no `0x`.
                let (prefix, len) = match arg.as_str().unwrap() {
                    "^(0x)?[0-9a-fA-F]{40}$" => (None, 40),
                    "^[0-9a-fA-F]{64}$" => (Some(""), 64),
                    "^0x[0-9a-fA-F]{130}$" => (Some("0x"), 130),
                    other => panic!("the validator does not know the pattern {other}"),
                };
                v.as_str().is_none_or(|s| {
                    let h = match prefix {
                        None => s.strip_prefix("0x").unwrap_or(s),
                        Some(p) => match s.strip_prefix(p) {
                            Some(h) => h,
                            None => return false,
                        },
                    };
                    h.len() == len && h.bytes().all(|b| b.is_ascii_hexdigit())
                })
            }
            other => panic!("keyword {other} is not checked by this validator"),
        })
    }
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "null" => v.is_null(),
        // The parser wants integers written as integers; see the schema's description.
        "integer" => v.is_u64() || v.is_i64(),
        other => panic!("type {other} is not used"),
    }
}

fn as_i128(v: &Value) -> Option<i128> {
    v.as_u64()
        .map(i128::from)
        .or_else(|| v.as_i64().map(i128::from))
}

/// JSON pointers of every object inside `v`, `v` itself included.
fn objects(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            out.push(at.clone());
            for (k, x) in m {
                objects(x, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                objects(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// The free-form JSON fields, whose insides the schema does not describe.
const FREE_FORM: &[&str] = &[
    "/intent/args",
    "/execution/mutation",
    "/effects/return_value",
    "/effects/external_response",
];

#[test]
fn schema_and_parser_agree_on_variations_of_a_maximal_event() {
    let s = schema();
    let val = Validator { defs: &s["$defs"] };
    let parse =
        |v: &Value| EventInput::from_json(v.to_string().as_bytes(), DEFAULT_MAX_EVENT_BYTES);
    let base = maximal();
    assert!(val.valid(&s, &base), "the maximal event does not validate");
    parse(&base).unwrap();

    // Variations: (description, document).
    let mut docs: Vec<(String, Value)> = Vec::new();
    let mut ptrs = Vec::new();
    objects(&base, String::new(), &mut ptrs);
    ptrs.retain(|p| !FREE_FORM.iter().any(|f| p.starts_with(f)));
    let mut fields = 0;
    for p in &ptrs {
        let obj = base.pointer(p).unwrap().as_object().unwrap();
        let mut d = base.clone();
        d.pointer_mut(p)
            .unwrap()
            .as_object_mut()
            .unwrap()
            .insert("zz_unknown".into(), json!(1));
        docs.push((format!("{p}: unknown key"), d));
        for k in obj.keys() {
            fields += 1;
            let mut d = base.clone();
            d.pointer_mut(p).unwrap().as_object_mut().unwrap().remove(k);
            docs.push((format!("{p}/{k} removed"), d));
            for (what, x) in [
                ("null", json!(null)),
                ("string", json!("x")),
                ("empty string", json!("")),
                ("integer", json!(7)),
                ("negative", json!(-1)),
                ("float", json!(1.5)),
                ("too big", json!(18_446_744_073_709_551_615u64 as f64 * 2.0)),
                ("object", json!({})),
                ("array", json!([])),
                ("array of strings", json!(["a"])),
                ("bool", json!(true)),
            ] {
                let mut d = base.clone();
                *d.pointer_mut(&format!("{p}/{k}")).unwrap() = x;
                docs.push((format!("{p}/{k} = {what}"), d));
            }
        }
    }
    // The maximal event names every property: 12 + 2 + 4 + 5 + 4 + 8 + 3 + 4 + 2 + 3 + 6 + 5 +
    // 4 + 2 (parent_event and one delegated_to entry) + 1 (parent_event.to) + 1 + 3
    // (delegated_to[0].answers and its members) + 3 (code_provenance.capture and its members).
    assert_eq!(fields, 72);
    // Enum values, limits and patterns.
    let edits: Vec<(&str, Value)> = Category::NAMES
        .iter()
        .chain(&["File", "bogus"])
        .map(|c| ("/category", json!(c)))
        .chain(
            GuardrailVerdict::NAMES
                .iter()
                .chain(&["Allow", "block"])
                .map(|c| ("/policy_evaluation/0/verdict", json!(c))),
        )
        .chain(
            Decision::NAMES
                .iter()
                .chain(&["maybe"])
                .map(|c| ("/human_approval/decision", json!(c))),
        )
        .chain(
            afr_core::event::CaptureStrength::NAMES
                .iter()
                .chain(&["Inline", "self-reported"])
                .map(|c| ("/code_provenance/capture/strength", json!(c))),
        )
        .chain([
            ("/lane", json!("x".repeat(64))),
            ("/lane", json!("x".repeat(65))),
            ("/concurrent_with", json!((0..16).collect::<Vec<u64>>())),
            ("/concurrent_with", json!((0..17).collect::<Vec<u64>>())),
            ("/concurrent_with", json!([])),
            ("/concurrent_with", json!([u64::MAX])),
            ("/timestamp_us", json!(u64::MAX)),
            ("/timestamp_us", json!(0)),
            ("/intent/tool", json!("")),
            (
                "/delegation_provenance/parent_event/recorder",
                json!("00000000000000000000000000000000000aF2Af"),
            ),
            (
                "/delegation_provenance/parent_event/recorder",
                json!("0x00000000000000000000000000000000000aF2A"),
            ),
            (
                "/delegation_provenance/parent_event/recorder",
                json!("0x00000000000000000000000000000000000aF2Ag"),
            ),
            (
                "/delegation_provenance/parent_event/recorder",
                json!("0X00000000000000000000000000000000000aF2Af"),
            ),
            ("/policy_evaluation", json!([])),
            ("/context_provenance/sources", json!([{ "uri": "only" }])),
            ("/effects/state_changes", json!([1])),
            ("/intent/args", json!(null)),
            ("/intent/args", json!([1, "a", { "b": null }])),
        ])
        .collect();
    for (p, x) in edits {
        let mut d = base.clone();
        *d.pointer_mut(p).unwrap() = x.clone();
        docs.push((format!("{p} = {x}"), d));
    }

    let mut disagree = Vec::new();
    let (mut accepted, mut rejected) = (0, 0);
    for (what, d) in &docs {
        let by_schema = val.valid(&s, d);
        let by_parser = parse(d);
        if by_schema != by_parser.is_ok() {
            disagree.push(format!(
                "{what}: schema says {by_schema}, parser says {by_parser:?}"
            ));
        }
        if by_schema {
            accepted += 1
        } else {
            rejected += 1
        }
    }
    assert!(
        disagree.is_empty(),
        "{} disagreements:\n{}",
        disagree.len(),
        disagree.join("\n")
    );
    // Both outcomes are well represented, so neither side passes vacuously.
    assert!(
        accepted > 100 && rejected > 300,
        "{accepted} accepted, {rejected} rejected"
    );
}
