//! `afr import`: records (or prints) the events [`afr_import`] makes of other agents' logs.

use std::{
    io::{BufWriter, Write},
    path::{Path, PathBuf},
    process::ExitCode,
};

use afr_import::{DEFAULT_MAX_OUTPUT_BYTES, SweAgentOptions, swe_agent_events};
use afr_recorder::Recorder;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use crate::RecordOpts;

/// `afr import <format>`.
#[derive(Subcommand, Debug)]
pub enum ImportCmd {
    /// SWE-agent trajectories (`*.traj`): one event per step (mapping: docs/import-swe-agent.md).
    SweAgent(SweAgentArgs),
}

/// Arguments of `afr import swe-agent`.
#[derive(Args, Debug)]
pub struct SweAgentArgs {
    /// Trajectory files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print the events as JSON lines (the input of `afr record`) instead of recording them.
    #[arg(long)]
    print: bool,
    /// With --print: the sequence number the first printed event will get when recorded, so
    /// parent links can be filled in. Without it, --print leaves parent links out.
    #[arg(long, requires = "print")]
    first_seq: Option<u64>,
    /// Observation bytes kept per event (the full output's length and SHA-256 are always kept).
    #[arg(long, default_value_t = DEFAULT_MAX_OUTPUT_BYTES)]
    max_output_bytes: usize,
    #[command(flatten)]
    opts: RecordOpts,
}

/// Runs `afr import`.
pub fn run(dir: &Path, cmd: ImportCmd) -> Result<ExitCode> {
    let ImportCmd::SweAgent(a) = cmd;
    let mut base = SweAgentOptions {
        first_seq: a.first_seq,
        max_output_bytes: a.max_output_bytes,
        max_event_bytes: a.opts.max_event_bytes,
        instance_hint: None,
    };
    let recorder = if a.print {
        None
    } else {
        Some({
            let _takeover = afr_client::take_over(dir)?;
            Recorder::open(dir, a.opts.config())?
        })
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let (mut files_ok, mut events_ok, mut bad) = (0u64, 0u64, 0u64);
    for file in &a.files {
        if let Some(r) = &recorder {
            base.first_seq = Some(r.next_seq());
        }
        base.instance_hint = file
            .file_name()
            .and_then(|n| n.to_str())
            .map(|n| n.strip_suffix(".traj").unwrap_or(n).to_owned());
        let events = match std::fs::read_to_string(file)
            .map_err(|e| e.to_string())
            .and_then(|text| swe_agent_events(&text, &base).map_err(|e| e.to_string()))
        {
            Ok(ev) => ev,
            Err(e) => {
                eprintln!(
                    "afr: {}: {}; nothing imported from this file",
                    crate::esc(file.display()),
                    crate::esc(e)
                );
                bad += 1;
                continue;
            }
        };
        let n = events.len() as u64;
        match &recorder {
            None => {
                for ev in &events {
                    serde_json::to_writer(&mut out, ev)?;
                    out.write_all(b"\n")?;
                }
                if let Some(s) = &mut base.first_seq {
                    *s = s.saturating_add(n);
                }
            }
            Some(r) => {
                let first = r.next_seq();
                for (i, ev) in events.into_iter().enumerate() {
                    let rc = r
                        .record(ev)
                        .with_context(|| format!("{}: step {i}", file.display()))?;
                    // Parent links were computed from `first`; the store is ours alone (it is
                    // locked), so the sequence cannot move under us. Checked all the same.
                    anyhow::ensure!(
                        rc.seq == first + i as u64,
                        "{}: step {i} got seq {} instead of {}",
                        file.display(),
                        rc.seq,
                        first + i as u64
                    );
                }
                eprintln!(
                    "{}: {n} steps recorded as events {first}..={}",
                    crate::esc(file.display()),
                    first + n - 1
                );
            }
        }
        files_ok += 1;
        events_ok += n;
    }
    out.flush()?;
    if let Some(r) = &recorder {
        r.flush()?;
        let (epoch, open) = r.open_epoch();
        eprintln!(
            "imported {events_ok} events from {files_ok} trajectories ({bad} rejected); next seq {}, open epoch {epoch} holds {open}",
            r.next_seq()
        );
    } else {
        eprintln!("printed {events_ok} events from {files_ok} trajectories ({bad} rejected)");
    }
    Ok(if bad > 0 {
        ExitCode::from(crate::EXIT_DATAERR)
    } else {
        ExitCode::SUCCESS
    })
}
