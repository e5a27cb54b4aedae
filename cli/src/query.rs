//! `afr query`: forensic questions over the operator's own store, answered as a table, as JSON
//! lines, or as a disclosure bundle a third party verifies.
//!
//! The language is `afr_recorder::query` (syntax and examples in `docs/query.md`).

use std::{
    io::{BufWriter, Write},
    path::{Path, PathBuf},
    process::ExitCode,
    time::Instant,
};

use afr_core::{calendar, text::escape};
use afr_recorder::{
    LogReader, RecordError,
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
    expr: String,
    /// One JSON object per matching event: seq, epoch, and the decrypted event.
    #[arg(long)]
    json: bool,
    /// Also write the matching events into this disclosure bundle (`afr verify-bundle` and
    /// `afr-verify bundle` check it). The events must be in sealed epochs.
    #[arg(long)]
    disclose: Option<PathBuf>,
    /// With --disclose: include each event's sealed payload and per-event key.
    #[arg(long, requires = "disclose")]
    with_keys: bool,
    /// Show at most this many events (the bundle still holds every match).
    #[arg(long)]
    limit: Option<usize>,
}

/// Runs `afr query`.
pub fn run(dir: &Path, a: &QueryArgs) -> Result<ExitCode> {
    let q = match Query::parse(&a.expr) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("afr: query: {}", parse_error_text(&e));
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };
    let r = LogReader::open(dir)?;
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
    // In --json mode stdout is for jq: the summary goes to stderr.
    let summary = summary(&res, took, shown.len());
    if a.json {
        eprint!("{summary}");
    } else {
        print!("{summary}");
    }
    if let Some(file) = &a.disclose {
        if res.matches.is_empty() {
            anyhow::bail!("no events matched: nothing to disclose");
        }
        let bundle = r.disclose(&res.matches, a.with_keys)?;
        let bytes = bundle.encode();
        std::fs::write(file, &bytes).with_context(|| format!("cannot write {}", file.display()))?;
        let msg = format!(
            "disclosed {} events ({}) in {} bytes to {}\n",
            bundle.events.len(),
            if a.with_keys {
                "with per-event keys"
            } else {
                "no keys"
            },
            bytes.len(),
            crate::esc(file.display())
        );
        if a.json {
            eprint!("{msg}");
        } else {
            print!("{msg}");
        }
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

fn summary(res: &QueryResult, took: std::time::Duration, shown: usize) -> String {
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

/// The table of `afr query`: one row per event of `seqs`, read from `events` in step.
fn print_table(
    out: &mut impl Write,
    seqs: &[u64],
    events: impl Iterator<Item = Result<LoadedEvent, RecordError>>,
) -> Result<()> {
    if seqs.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "{:>8}  {:<24}  {:<10}  {:<22}  summary",
        "seq", "time", "category", "tool"
    )?;
    for (&seq, ev) in seqs.iter().zip(events) {
        let ev = ev?;
        let (tool, what) = match &ev.payload {
            None => (
                "(erased)".to_owned(),
                format!("payload destroyed by erasure of epoch {}", ev.record.epoch),
            ),
            Some(p) => {
                let what = p
                    .execution
                    .as_ref()
                    .map(|e| e.command.clone())
                    .or_else(|| {
                        p.effects
                            .as_ref()
                            .and_then(|f| f.state_changes.first().cloned())
                    })
                    .or_else(|| {
                        p.human_approval
                            .as_ref()
                            .map(|h| format!("{} by {}", h.decision.name(), h.approver))
                    })
                    .unwrap_or_else(|| {
                        if p.intent.args.is_null() {
                            String::new()
                        } else {
                            p.intent.args.to_string()
                        }
                    });
                (p.intent.tool.clone(), what)
            }
        };
        writeln!(
            out,
            "{seq:>8}  {:<24}  {:<10}  {:<22}  {}",
            calendar::format_time_us(ev.record.timestamp_us),
            ev.record.category.name(),
            clip(&tool, 22),
            clip(&what, 70)
        )?;
    }
    Ok(())
}
