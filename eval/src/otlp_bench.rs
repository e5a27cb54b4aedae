//! `afr bench otlp`: tool spans ingested over OTLP/HTTP (protobuf, batches of 512) by a real
//! `afr otlp`, side by side with the same events POSTed to a real `afr serve` as NDJSON
//! batches of the same size, in one run, both into group durability.
//!
//! The spans are synthetic GenAI `execute_tool` spans (tool name, call id, JSON arguments and
//! result, a conversation id), one trace per batch. The `afr serve` side gets exactly the
//! events `afr otlp` makes of them ([`afr_otlp::map::map`]), each with its idempotency key, so
//! both sides do the same recording work; the OTLP side also decodes protobuf and maps spans.
//! Every answer is checked, and both stores must end with one event per span.

use std::{
    path::PathBuf,
    process::{Command, ExitCode},
    time::Instant,
};

use afr_otlp::{
    opentelemetry_proto::tonic::{
        collector::trace::v1::ExportTraceServiceRequest,
        common::v1::KeyValue,
        resource::v1::Resource,
        trace::v1::{ResourceSpans, ScopeSpans, Span},
    },
    prost::Message,
};
use anyhow::{Context, Result, ensure};
use clap::Args;
use serde_json::json;

use crate::{
    mcp_bench::{agent, events_in, start_until_url},
    serve_bench::{Conn, Server, check_receipts, parallel},
};

/// Tool spans per second the issue asks of the receiver on 2 cores.
pub const TARGET_SPANS_PER_S: f64 = 20_000.0;

/// Options of `afr bench otlp`.
#[derive(Args, Debug)]
pub struct OtlpBench {
    /// Tool spans sent on each side.
    #[arg(long, default_value_t = 102_400)]
    spans: u64,
    /// Spans per export (and events per NDJSON batch).
    #[arg(long, default_value_t = 512)]
    batch: u64,
    /// Connections sending at once on each side.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// The `afr` program (default: the one beside this program).
    #[arg(long)]
    afr: Option<PathBuf>,
    /// One JSON object.
    #[arg(long)]
    json: bool,
}

fn kv(key: &str, v: &str) -> KeyValue {
    afr_otlp::map::string_attr(key, v)
}

/// Export `b`: `n` tool spans of one trace.
fn export(b: u64, n: u64) -> ExportTraceServiceRequest {
    let mut trace = [0u8; 16];
    trace[..8].copy_from_slice(&(b + 1).to_be_bytes());
    trace[8..].copy_from_slice(&0xafu64.to_be_bytes());
    let spans = (0..n)
        .map(|i| {
            let t = 1_796_000_000_000_000_000 + (b * n + i) * 1_000;
            Span {
                trace_id: trace.to_vec(),
                span_id: (b * n + i + 1).to_be_bytes().to_vec(),
                name: format!("execute_tool get_weather_{}", i % 10),
                kind: 1,
                start_time_unix_nano: t,
                end_time_unix_nano: t + 500,
                attributes: vec![
                    kv("gen_ai.operation.name", "execute_tool"),
                    kv("gen_ai.tool.name", &format!("get_weather_{}", i % 10)),
                    kv("gen_ai.tool.call.id", &format!("call_{b}_{i}")),
                    kv(
                        "gen_ai.tool.call.arguments",
                        &json!({"city": format!("city {}", i % 97), "unit": "celsius"}).to_string(),
                    ),
                    kv(
                        "gen_ai.tool.call.result",
                        &json!({"temp_c": (i % 40) as f64 + 0.5, "sky": "clear"}).to_string(),
                    ),
                    kv("gen_ai.agent.name", "bench-agent"),
                    kv("gen_ai.conversation.id", &format!("conv-{}", b % 16)),
                ],
                ..Default::default()
            }
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    kv("service.name", "afr-bench"),
                    kv("telemetry.sdk.name", "opentelemetry"),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// Runs `afr bench otlp` and prints its figures.
pub fn run(b: &OtlpBench) -> Result<ExitCode> {
    let afr = match &b.afr {
        Some(p) => p.clone(),
        None => crate::serve_bench::afr_beside()?,
    };
    let batch = b.batch.max(1);
    let batches = b.spans.div_ceil(batch);
    let total = batches * batch;
    let clients = b.clients.max(1);
    // Bodies built before timing: the exporter's work is not the receiver's.
    let exports: Vec<ExportTraceServiceRequest> = (0..batches).map(|i| export(i, batch)).collect();
    let protobuf: Vec<Vec<u8>> = exports.iter().map(Message::encode_to_vec).collect();
    let ndjson: Vec<Vec<u8>> = exports
        .iter()
        .map(|e| {
            let mut body = Vec::new();
            for ev in afr_otlp::map::map(e).0 {
                let mut line = serde_json::to_value(&ev.event).unwrap_or_default();
                line["idempotency_key"] = ev.key.into();
                body.extend_from_slice(line.to_string().as_bytes());
                body.push(b'\n');
            }
            body
        })
        .collect();
    let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;

    // OTLP/HTTP protobuf into `afr otlp`.
    let odir = tmp.path().join("otlp");
    afr_recorder::init(&odir, [0x42; 20])?;
    let mut cmd = Command::new(&afr);
    cmd.arg("--dir")
        .arg(&odir)
        .args([
            "otlp",
            "--http",
            "127.0.0.1:0",
            "--no-grpc",
            "--max-inflight",
        ])
        .arg(clients.max(8).to_string());
    let (receiver, url) = start_until_url(cmd, "OTLP/HTTP on http://")?;
    let (otlp_wall, otlp_lat) = parallel(clients, |t| {
        let a = agent();
        let mut lat = Vec::new();
        for body in protobuf.iter().skip(t).step_by(clients) {
            let t0 = Instant::now();
            let mut r = a
                .post(&url)
                .header("content-type", "application/x-protobuf")
                .send(&body[..])?;
            ensure!(r.status() == 200, "afr otlp answered {}", r.status());
            let _ = r.body_mut().read_to_vec()?;
            lat.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        Ok(lat)
    })?;
    drop(receiver);
    let recorded = events_in(&afr, &odir)?;
    ensure!(
        recorded == total,
        "afr otlp recorded {recorded} of {total} spans"
    );

    // The same events as NDJSON into `afr serve`.
    let sdir = tmp.path().join("served");
    let mut server = Server::start(
        &afr,
        &sdir,
        &[
            "--max-batch-lines".into(),
            batch.max(1000).to_string(),
            "--max-inflight".into(),
            clients.max(16).to_string(),
        ],
    )?;
    let socket = server.socket.clone();
    let (served_wall, served_lat) = parallel(clients, |t| {
        let mut c = Conn::connect(&socket)?;
        let mut lat = Vec::new();
        for body in ndjson.iter().skip(t).step_by(clients) {
            let t0 = Instant::now();
            let answer = c.post("application/x-ndjson", body)?;
            check_receipts(&answer, batch as usize)?;
            lat.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        Ok(lat)
    })?;
    server.stop()?;
    let recorded = events_in(&afr, &sdir)?;
    ensure!(
        recorded == total,
        "afr serve recorded {recorded} of {total} events"
    );

    let rate = |wall: std::time::Duration| (total as f64 / wall.as_secs_f64()).round();
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (crate::bench::percentile(&v, 0.5) / 100.0).round() / 10.0
    };
    let (otlp_rate, served_rate) = (rate(otlp_wall), rate(served_wall));
    let report = json!({
        "spans": total, "batch": batch, "clients": clients, "durability": "group",
        "otlp_http_protobuf": {"spans_per_s": otlp_rate, "median_ms_per_export": median(otlp_lat)},
        "serve_ndjson": {"events_per_s": served_rate, "median_ms_per_batch": median(served_lat)},
        "ratio": (otlp_rate / served_rate * 1000.0).round() / 1000.0,
        "target_spans_per_s": TARGET_SPANS_PER_S,
    });
    if b.json {
        println!("{report}");
        return Ok(ExitCode::SUCCESS);
    }
    println!("{total} tool spans in exports of {batch}, {clients} connections, group durability");
    println!(
        "  afr otlp, OTLP/HTTP protobuf   {otlp_rate:>9} spans/s   median {} ms per export",
        report["otlp_http_protobuf"]["median_ms_per_export"]
    );
    println!(
        "  afr serve, NDJSON /v1/events   {served_rate:>9} events/s  median {} ms per batch",
        report["serve_ndjson"]["median_ms_per_batch"]
    );
    println!(
        "  ratio {:.3}; target ≥ {TARGET_SPANS_PER_S} tool spans/s: {}",
        otlp_rate / served_rate,
        if otlp_rate >= TARGET_SPANS_PER_S {
            "met"
        } else {
            "missed"
        }
    );
    Ok(ExitCode::SUCCESS)
}
