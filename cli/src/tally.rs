//! What `afr record` prints, in both of its modes (straight into the store, or through a
//! running `afr serve`): a receipt line per event with `--receipts`, the rejected lines on
//! stderr, progress on a terminal, and the closing summary.

use std::{
    io::{BufWriter, IsTerminal, StdoutLock, Write},
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::Result;

use crate::{EXIT_DATAERR, esc};

/// The counts and the output of one `afr record` run.
pub(crate) struct Tally {
    out: BufWriter<StdoutLock<'static>>,
    receipts: bool,
    progress: bool,
    /// Events recorded (or found recorded under their idempotency key).
    pub ok: u64,
    /// Lines rejected.
    pub bad: u64,
    last_progress: Instant,
    start: Instant,
}

/// One receipt as `--receipts` prints it.
pub(crate) struct ReceiptLine<'a> {
    /// The input line.
    pub line: u64,
    /// Sequence number.
    pub seq: u64,
    /// Epoch.
    pub epoch: u64,
    /// Leaf hash, hex.
    pub leaf_hash: &'a str,
    /// Timestamp, µs.
    pub timestamp_us: u64,
    /// Recorded earlier under the same idempotency key.
    pub duplicate: bool,
}

impl Tally {
    /// Starts counting; with `receipts`, receipt lines go to stdout.
    pub(crate) fn new(receipts: bool) -> Tally {
        Tally {
            out: BufWriter::new(std::io::stdout().lock()),
            receipts,
            progress: std::io::stderr().is_terminal(),
            ok: 0,
            bad: 0,
            last_progress: Instant::now(),
            start: Instant::now(),
        }
    }

    /// Counts a recorded event and prints its receipt line with `--receipts`.
    pub(crate) fn recorded(&mut self, r: &ReceiptLine<'_>) -> Result<()> {
        self.ok += 1;
        if self.receipts {
            writeln!(
                self.out,
                r#"{{"line":{},"seq":{},"epoch":{},"leaf_hash":"{}","timestamp_us":{}{}}}"#,
                r.line,
                r.seq,
                r.epoch,
                r.leaf_hash,
                r.timestamp_us,
                if r.duplicate {
                    r#","duplicate":true"#
                } else {
                    ""
                }
            )?;
        }
        Ok(())
    }

    /// Counts a rejected line and says why on stderr.
    pub(crate) fn rejected(&mut self, line: u64, why: impl std::fmt::Display) {
        eprintln!("afr: line {line}: {}; event not recorded", esc(why));
        self.bad += 1;
    }

    /// Flushes the receipt lines written so far (when they promise durability).
    pub(crate) fn flush(&mut self) -> Result<()> {
        if self.receipts {
            self.out.flush()?;
        }
        Ok(())
    }

    /// Redraws the progress line on a terminal, at most four times a second.
    pub(crate) fn tick(&mut self) {
        if self.progress && self.last_progress.elapsed() > Duration::from_millis(250) {
            eprint!("\rrecorded {} events ({} rejected)", self.ok, self.bad);
            self.last_progress = Instant::now();
        }
    }

    /// Prints the summary (`next seq`, the open epoch and its size) and gives the exit code:
    /// 65 (`EX_DATAERR`) if any line was rejected.
    pub(crate) fn finish(mut self, next_seq: u64, open_epoch: u64, open: u64) -> Result<ExitCode> {
        self.out.flush()?;
        if self.progress {
            eprint!("\r");
        }
        eprintln!(
            "recorded {} events in {:.2?} ({} rejected); next seq {next_seq}, open epoch {open_epoch} holds {open}",
            self.ok,
            self.start.elapsed(),
            self.bad,
        );
        Ok(if self.bad > 0 {
            ExitCode::from(EXIT_DATAERR)
        } else {
            ExitCode::SUCCESS
        })
    }
}
