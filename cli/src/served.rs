//! The commands that go through `afr serve` when one runs on the directory (its socket exists
//! and answers): the same output and exit codes as without a server.

use std::{
    io::{BufRead, BufWriter, Read, Write},
    path::Path,
    process::ExitCode,
    time::Duration,
};

use afr_client::socket::{Client, Response};
use afr_core::{EventInput, event::InputError};
use afr_recorder::query::QueryResult;
use anyhow::{Context, Result};
use serde_json::Value;

use crate::{
    esc, query,
    tally::{ReceiptLine, Tally},
};

/// Most lines the CLI sends in one batch.
const BATCH_LINES: usize = 100;
/// Most bytes the CLI sends in one batch (the server refuses bodies over its limit, 16 MiB
/// by default).
const BATCH_BYTES: usize = 4 << 20;

fn fail(r: &Response, what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "afr serve: {what}: {} ({})",
        esc(r.error_message()),
        r.status
    )
}

/// `GET /v1/status`.
pub fn status(c: &mut Client) -> Result<Value> {
    let r = c.request("GET", "/v1/status", None, b"")?;
    if r.status != 200 {
        return Err(fail(&r, "status"));
    }
    Ok(r.json())
}

/// `afr export` through the server: the streamed body into `<out>.partial`, synced, renamed.
pub fn export(c: &mut Client, out: &Path) -> Result<ExitCode> {
    let mut r = c
        .another()?
        .request_stream("GET", "/v1/export", None, b"")?;
    if r.status != 200 {
        let mut body = Vec::new();
        let _ = r.read_to_end(&mut body);
        let resp = Response {
            status: r.status,
            headers: r.headers.clone(),
            body,
        };
        return Err(fail(&resp, "export"));
    }
    let n = |k: &str| {
        r.header(k)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_default()
    };
    let (events, epochs, unsealed) = (
        n("afr-export-events"),
        n("afr-export-epochs"),
        n("afr-export-unsealed"),
    );
    let tmp = out.with_extension("partial");
    let f =
        std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let mut w = BufWriter::new(f);
    let bytes = std::io::copy(&mut r, &mut w).context("afr serve: export cut short")?;
    w.flush()?;
    w.get_ref().sync_all()?;
    std::fs::rename(&tmp, out)?;
    println!(
        "exported {events} events in {epochs} sealed epochs ({unsealed} not yet sealed), {bytes} bytes, to {}",
        esc(out.display())
    );
    Ok(ExitCode::SUCCESS)
}

/// The bundle of `seqs` from `POST /v1/disclose`: its bytes, events, headers, erased epochs.
pub fn disclose_bundle(
    c: &mut Client,
    seqs: &[u64],
    with_keys: bool,
) -> Result<(Vec<u8>, u64, u64, Vec<u64>)> {
    let ask = serde_json::json!({ "seqs": seqs, "with_keys": with_keys }).to_string();
    let r = c.request(
        "POST",
        "/v1/disclose",
        Some("application/json"),
        ask.as_bytes(),
    )?;
    if r.status != 200 {
        return Err(fail(&r, "disclose"));
    }
    let n = |k: &str| {
        r.header(k)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_default()
    };
    let erased = r
        .header("afr-bundle-erased")
        .unwrap_or_default()
        .split(',')
        .filter_map(|e| e.parse().ok())
        .collect();
    Ok((
        r.body.clone(),
        n("afr-bundle-events"),
        n("afr-bundle-headers"),
        erased,
    ))
}

/// `afr query` through the server (the query already parsed locally).
pub fn query(c: &mut Client, a: &query::QueryArgs) -> Result<ExitCode> {
    let mut target = format!(
        "/v1/events?summary=true&query={}",
        afr_client::url_encode(&a.expr)
    );
    if let Some(l) = a.limit {
        target += &format!("&limit={l}");
    }
    let resp = c.another()?.request_stream("GET", &target, None, b"")?;
    if resp.status != 200 {
        let status = resp.status;
        let headers = resp.headers.clone();
        let mut body = Vec::new();
        let mut resp = resp;
        let _ = resp.read_to_end(&mut body);
        return Err(fail(
            &Response {
                status,
                headers,
                body,
            },
            "query",
        ));
    }
    let out = std::io::stdout();
    let mut out = BufWriter::new(out.lock());
    let mut rows = Vec::new();
    let mut summary = None;
    for line in std::io::BufReader::new(resp).lines() {
        let line = line.context("afr serve: query answer cut short")?;
        let v: Value = serde_json::from_str(&line).context("afr serve: query answer")?;
        if let Some(s) = v.get("summary") {
            summary = Some(s.clone());
        } else if a.json {
            writeln!(out, "{line}")?;
            rows.push(None);
        } else {
            rows.push(Some(query::Row::of_line(&v)?));
        }
    }
    let shown = rows.len();
    if !a.json {
        query::print_rows(&mut out, &rows.into_iter().flatten().collect::<Vec<_>>())?;
    }
    out.flush()?;
    drop(out);
    let s = summary.context("afr serve: query answer without its summary")?;
    let nums = |k: &str| -> Vec<u64> {
        s[k].as_array()
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default()
    };
    let res = QueryResult {
        matches: nums("matches"),
        unknown: nums("unknown"),
        erased_epochs: nums("erased_epochs"),
        notes: s["notes"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        indexed: s["indexed"].as_bool().unwrap_or_default(),
        examined: s["examined"].as_u64().unwrap_or_default(),
        decrypted: s["decrypted"].as_u64().unwrap_or_default(),
    };
    let took = Duration::from_micros(s["took_us"].as_u64().unwrap_or_default());
    query::finish(a, &res, took, shown, |seqs| {
        let (bytes, events, _, _) = disclose_bundle(c, seqs, a.with_keys)?;
        Ok((bytes, usize::try_from(events)?))
    })
}

/// `afr record` through the server: lines are sent in NDJSON batches (at most
/// [`BATCH_LINES`], and sent as soon as the input has nothing more buffered, so a live pipe is
/// recorded as it comes); the output is what direct recording prints.
pub fn record(
    c: &mut Client,
    mut input: std::io::BufReader<Box<dyn Read>>,
    receipts: bool,
    cap: usize,
) -> Result<ExitCode> {
    let mut tally = Tally::new(receipts);
    let mut line_no = 0u64;
    let mut batch: Vec<u8> = Vec::new();
    let mut batch_lines: Vec<u64> = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = input
            .read_until(b'\n', &mut line)
            .context("cannot read input")?;
        if n > 0 {
            line_no += 1;
            let l = line.strip_suffix(b"\n").unwrap_or(&line);
            let l = l.strip_suffix(b"\r").unwrap_or(l);
            if l.iter().all(u8::is_ascii_whitespace) {
                // Skipped, as without a server.
            } else if l.len() > cap + afr_server::MAX_LINE_SLACK {
                // The server would refuse the whole batch: the line's own error instead.
                let e = EventInput::from_json(l, cap).err().unwrap_or(InputError {
                    path: String::new(),
                    message: format!("line is over the cap of {cap} bytes"),
                });
                tally.rejected(line_no, e);
            } else {
                batch.extend_from_slice(l);
                batch.push(b'\n');
                batch_lines.push(line_no);
            }
        }
        let eof = n == 0;
        let send = !batch_lines.is_empty()
            && (eof
                || batch_lines.len() >= BATCH_LINES
                || batch.len() >= BATCH_BYTES
                || input.buffer().is_empty());
        if send {
            let v = post_batch(c, &batch)?;
            // The server numbers the batch's lines from 1; the input's own numbers are kept.
            let input_line = |v: &Value| {
                let i = v["line"].as_u64().unwrap_or(1).saturating_sub(1) as usize;
                batch_lines.get(i).copied().unwrap_or_default()
            };
            for rc in v["receipts"].as_array().into_iter().flatten() {
                let n = |k: &str| rc[k].as_u64().unwrap_or_default();
                tally.recorded(&ReceiptLine {
                    line: input_line(rc),
                    seq: n("seq"),
                    epoch: n("epoch"),
                    leaf_hash: rc["leaf_hash"].as_str().unwrap_or_default(),
                    timestamp_us: n("timestamp_us"),
                    duplicate: rc["duplicate"] == true,
                })?;
            }
            tally.flush()?;
            for e in v["errors"].as_array().into_iter().flatten() {
                let err = InputError {
                    path: e["field"].as_str().unwrap_or_default().to_owned(),
                    message: e["message"].as_str().unwrap_or_default().to_owned(),
                };
                tally.rejected(input_line(e), err);
            }
            batch.clear();
            batch_lines.clear();
        }
        tally.tick();
        if eof {
            break;
        }
    }
    let st = status(c)?;
    let n = |k: &str| st[k].as_u64().unwrap_or_default();
    tally.finish(n("events"), n("open_epoch"), n("open_epoch_events"))
}

/// Posts one NDJSON batch; on 503 waits as `Retry-After` says and sends it again (a 503 is
/// answered before the body is read: nothing of it was recorded).
fn post_batch(c: &mut Client, batch: &[u8]) -> Result<Value> {
    loop {
        let r = c.request("POST", "/v1/events", Some("application/x-ndjson"), batch)?;
        match r.status {
            200 | 422 => return Ok(r.json()),
            503 if r.header("retry-after").is_some() => {
                let s = r
                    .header("retry-after")
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(1u64);
                std::thread::sleep(Duration::from_secs(s.min(30)));
            }
            _ => return Err(fail(&r, "record")),
        }
    }
}
