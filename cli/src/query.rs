//! `afr query`: forensic questions over the operator's own store, answered as a table, as JSON
//! lines, or as a disclosure bundle a third party verifies.
//!
//! The language is `afr_recorder::query` (syntax and examples in `docs/query.md`).

use std::{
    io::{BufWriter, Write},
    path::{Path, PathBuf},
    process::ExitCode,
    time::{Duration, Instant},
};

use afr_core::{calendar, text::escape};
use afr_recorder::{
    RecordError,
    query::{self, LoadedEvent, Query, QueryResult},
};
use anyhow::{Context, Result};
use clap::Args;

/// Exit code of a query that does not parse (sysexits `EX_USAGE`).
const EXIT_USAGE: u8 = 64;

/// Options of `afr query`.
#[derive(Args, Debug)]
pub struct QueryArgs {
    /// The query, e.g. 'intent.tool = "psql" and policy_evaluation[].verdict = "deny"'
    /// (syntax: docs/query.md).
    pub(crate) expr: String,
    /// One JSON object per matching event: seq, epoch, and the decrypted event.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also write the matching events into this disclosure bundle (`afr verify-bundle` and
    /// `afr-verify bundle` check it). The events must be in sealed epochs.
    #[arg(long)]
    pub(crate) disclose: Option<PathBuf>,
    /// With --disclose: include each event's sealed payload and per-event key.
    #[arg(long, requires = "disclose")]
    pub(crate) with_keys: bool,
    /// Show at most this many events (the bundle still holds every match).
    #[arg(long)]
    pub(crate) limit: Option<usize>,
    /// Another recorder's disclosure bundle (with keys), repeatable: `ancestors(N)` and
    /// `descendants(N)` are followed into it across delegation links (docs/spec/delegation.md).
    #[arg(long = "bundle", value_name = "FILE")]
    pub(crate) bundles: Vec<PathBuf>,
}

/// Runs `afr query`, then follows its relations into `--bundle`s.
pub fn run(dir: &Path, a: &QueryArgs) -> Result<ExitCode> {
    let code = run_local(dir, a)?;
    if !a.bundles.is_empty()
        && let Ok(q) = Query::parse(&a.expr)
    {
        let own = afr_client::Door::reader(dir)?.recorder_id()?;
        crate::crossq::print(dir, own, &q, &a.bundles, a.json)?;
    }
    Ok(code)
}

fn run_local(dir: &Path, a: &QueryArgs) -> Result<ExitCode> {
    let q = match Query::parse(&a.expr) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("afr: query: {}", parse_error_text(&e));
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };
    let mut door = afr_client::Door::reader(dir)?;
    if let Some(c) = door.socket() {
        return crate::served::query(c, a);
    }
    let r = door.log().context("the store, read-only")?;
    let started = Instant::now();
    let res = r.query(&q)?;
    let took = started.elapsed();
    let out = std::io::stdout();
    let mut out = BufWriter::new(out.lock());
    let shown = &res.matches[..a.limit.unwrap_or(usize::MAX).min(res.matches.len())];
    if a.json {
        for (&seq, ev) in shown.iter().zip(r.load_events(shown)) {
            let ev = ev?;
            let v = serde_json::json!({
                "seq": seq,
                "epoch": ev.record.epoch,
                "erased": ev.payload.is_none(),
                "event": ev.event_json(),
            });
            writeln!(out, "{v}")?;
        }
    } else {
        print_table(&mut out, shown, r.load_events(shown))?;
    }
    out.flush()?;
    drop(out);
    finish(a, &res, took, shown.len(), |seqs| {
        let bundle = r.disclose(seqs, a.with_keys)?;
        Ok((bundle.encode(), bundle.events.len()))
    })
}

/// The end of `afr query`, run here or by the server: the summary of `res`, then with
/// --disclose the bundle of every match, made by `disclose` (its bytes and number of events),
/// written to the file. In --json mode stdout is for jq: what is said goes to stderr.
pub(crate) fn finish(
    a: &QueryArgs,
    res: &QueryResult,
    took: Duration,
    shown: usize,
    disclose: impl FnOnce(&[u64]) -> Result<(Vec<u8>, usize)>,
) -> Result<ExitCode> {
    let say = |text: &str| {
        if a.json {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    };
    say(&summary(res, took, shown));
    if let Some(file) = &a.disclose {
        if res.matches.is_empty() {
            anyhow::bail!("no events matched: nothing to disclose");
        }
        let (bytes, events) = disclose(&res.matches)?;
        std::fs::write(file, &bytes).with_context(|| format!("cannot write {}", file.display()))?;
        say(&format!(
            "disclosed {events} events ({}) in {} bytes to {}\n",
            if a.with_keys {
                "with per-event keys"
            } else {
                "no keys"
            },
            bytes.len(),
            crate::esc(file.display())
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// A parse error as `ParseError`'s `Display` lays it out (message, query, caret line), with
/// the message and the query escaped and the caret moved under the bad token as shown.
fn parse_error_text(e: &query::ParseError) -> String {
    let chars: Vec<char> = e.query.chars().collect();
    let start = e.column.saturating_sub(1).min(chars.len());
    let end = (start + e.width.max(1)).min(chars.len());
    let shown = |cs: &[char]| escape(&cs.iter().collect::<String>()).chars().count();
    format!(
        "{} (column {})\n  {}\n  {}{}",
        escape(&e.message),
        e.column,
        escape(&e.query),
        " ".repeat(shown(&chars[..start])),
        "^".repeat(shown(&chars[start..end]).max(1))
    )
}

pub(crate) fn summary(res: &QueryResult, took: std::time::Duration, shown: usize) -> String {
    let mut s = format!(
        "{} event{} matched{} ({}; {} examined, {} decrypted, {:.1} ms)\n",
        res.matches.len(),
        if res.matches.len() == 1 { "" } else { "s" },
        if shown < res.matches.len() {
            format!(", {shown} shown")
        } else {
            String::new()
        },
        if res.indexed { "narrowed" } else { "full scan" },
        res.examined,
        res.decrypted,
        took.as_secs_f64() * 1e3
    );
    if !res.unknown.is_empty() {
        s += &format!(
            "{} events of erased epochs could not be examined (their payloads are destroyed): {}\n",
            res.unknown.len(),
            ranges(&res.unknown)
        );
    } else if !res.erased_epochs.is_empty() {
        s += &format!(
            "erased epochs {:?} hold no readable payloads; their events match no payload field\n",
            res.erased_epochs
        );
    }
    for n in &res.notes {
        s += &format!("note: {}\n", escape(n));
    }
    s
}

/// `1,2,3,7,9,10` → `1-3, 7, 9-10`.
fn ranges(seqs: &[u64]) -> String {
    afr_core::text::runs(seqs, "-")
}

/// `s` for one table cell: line breaks and tabs as spaces, every other unsafe character
/// escaped (a recorded tool or command is untrusted text), cut to `n` characters.
fn clip(s: &str, n: usize) -> String {
    let s = escape(&s.replace(['\n', '\t'], " ")).into_owned();
    if s.chars().count() <= n {
        s
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// One row of the table: seq, time, category, tool, summary.
pub(crate) struct Row {
    seq: u64,
    time: String,
    category: String,
    tool: String,
    what: String,
}

impl Row {
    /// The row of an event read from the store.
    fn of_loaded(seq: u64, ev: &LoadedEvent) -> Row {
        let (tool, what) = match &ev.payload {
            None => erased(ev.record.epoch),
            Some(p) => tool_and_summary(&p.intent, &p.execution, &p.effects, &p.human_approval),
        };
        Row {
            seq,
            time: calendar::format_time_us(ev.record.timestamp_us),
            category: ev.record.category.name().to_owned(),
            tool,
            what,
        }
    }

    /// The row of a line of `GET /v1/events` (`{"seq","epoch","erased","event"}`); an erased
    /// event's line carries no time or category, shown as `-`.
    pub(crate) fn of_line(v: &serde_json::Value) -> Result<Row> {
        let seq = v["seq"].as_u64().context("query answer without seq")?;
        if v["event"].is_null() {
            let (tool, what) = erased(v["epoch"].as_u64().unwrap_or_default());
            return Ok(Row {
                seq,
                time: "-".into(),
                category: "-".into(),
                tool,
                what,
            });
        }
        let ev = afr_core::EventInput::from_json(v["event"].to_string().as_bytes(), usize::MAX)
            .map_err(|e| anyhow::anyhow!("query answer, event {seq}: {e}"))?;
        let (tool, what) =
            tool_and_summary(&ev.intent, &ev.execution, &ev.effects, &ev.human_approval);
        Ok(Row {
            seq,
            time: ev.timestamp_us.map_or("-".into(), calendar::format_time_us),
            category: ev.category.name().to_owned(),
            tool,
            what,
        })
    }
}

fn erased(epoch: u64) -> (String, String) {
    (
        "(erased)".to_owned(),
        format!("payload destroyed by erasure of epoch {epoch}"),
    )
}

fn tool_and_summary(
    intent: &afr_core::event::Intent,
    execution: &Option<afr_core::event::Execution>,
    effects: &Option<afr_core::event::Effects>,
    human_approval: &Option<afr_core::event::HumanApproval>,
) -> (String, String) {
    let what = execution
        .as_ref()
        .map(|e| e.command.clone())
        .or_else(|| {
            effects
                .as_ref()
                .and_then(|f| f.state_changes.first().cloned())
        })
        .or_else(|| {
            human_approval
                .as_ref()
                .map(|h| format!("{} by {}", h.decision.name(), h.approver))
        })
        .unwrap_or_else(|| {
            if intent.args.is_null() {
                String::new()
            } else {
                intent.args.to_string()
            }
        });
    (intent.tool.clone(), what)
}

/// The table of `afr query`: one row per event of `seqs`, read from `events` in step.
fn print_table(
    out: &mut impl Write,
    seqs: &[u64],
    events: impl Iterator<Item = Result<LoadedEvent, RecordError>>,
) -> Result<()> {
    let mut rows = Vec::with_capacity(seqs.len());
    for (&seq, ev) in seqs.iter().zip(events) {
        rows.push(Row::of_loaded(seq, &ev?));
    }
    print_rows(out, &rows)
}

/// Prints the table's rows under its heading (nothing if there are none).
pub(crate) fn print_rows(out: &mut impl Write, rows: &[Row]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "{:>8}  {:<24}  {:<10}  {:<22}  summary",
        "seq", "time", "category", "tool"
    )?;
    for r in rows {
        writeln!(
            out,
            "{:>8}  {:<24}  {:<10}  {:<22}  {}",
            r.seq,
            r.time,
            r.category,
            clip(&r.tool, 22),
            clip(&r.what, 70)
        )?;
    }
    Ok(())
}
