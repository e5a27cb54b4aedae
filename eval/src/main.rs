//! `afr-eval`: the research harness (the paper's RQ1-RQ4, the tamper matrix, the synthetic
//! workload and the recorder benchmarks). `afr eval`, `afr cost`, `afr gen`, `afr bench` and
//! `afr eval-rq4` run this program; it is not part of what an operator or auditor installs.

use std::{
    io::{BufWriter, Write as _},
    process::ExitCode,
};

use afr_eval::{
    anchors_bench, bench, cost, hook_bench, matrix, mcp_bench, otlp_bench, query_bench, report,
    scale_bench, scenarios, serve_bench, synth, witness_bench,
};
use anyhow::Result;
use clap::{Parser, Subcommand};

/// mimalloc, as in `afr` (the benchmarks measure the recorder as `afr` runs it).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// AFR's research harness: the paper's evaluation reproduced, benchmarks, the tamper matrix.
#[derive(Parser, Debug)]
#[command(name = "afr-eval", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Reproduce the paper's evaluation (RQ1-RQ4) and write docs/evaluation.md with plots.
    Eval(report::EvalArgs),
    /// The paper's RQ2 cost table beside ours: gas measured from real receipts (on an anvil it
    /// starts, or --rpc), dollars per 100K events on L1 and an OP-stack L2, compromise window.
    Cost(cost::CostArgs),
    /// The paper's RQ4: structured queries vs grep on three synthetic incidents.
    #[command(alias = "eval-rq4")]
    Rq4 {
        /// Background events around the scenarios.
        #[arg(long, default_value_t = scenarios::DEFAULT_BACKGROUND)]
        background: u64,
        /// Seed of the background traffic.
        #[arg(long, default_value_t = synth::DEFAULT_SEED)]
        seed: u64,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// RQ3: attack classes against cumulative verifier configurations.
    Matrix {
        /// Number of random honest logs to attack (one case per attack class each).
        #[arg(long, default_value_t = matrix::DEFAULT_SEEDS)]
        seeds: u64,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Print a seeded synthetic workload as JSON lines (the paper's evaluation mix).
    Gen {
        /// Number of events.
        #[arg(long, default_value_t = 1000)]
        events: u64,
        /// Seed.
        #[arg(long, default_value_t = synth::DEFAULT_SEED)]
        seed: u64,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchCmd,
    },
}

#[derive(Subcommand, Debug)]
enum BenchCmd {
    /// Per-event latency, throughput and bytes per event of the real recorder and store.
    Record(bench::RecordBench),
    /// Indexed lookups and a full scan on a store of recorded events (default 1,000,000).
    Query(query_bench::QueryBench),
    /// A real `afr serve` over its Unix socket beside the in-process recorder: events/s of
    /// NDJSON batches and of single-event POSTs, and the latency a POST adds.
    Serve(serve_bench::ServeBench),
    /// A tools/call to the reference MCP server, direct and through `afr mcp wrap` / `afr mcp
    /// proxy`: the latency and throughput the gateway costs.
    Mcp(mcp_bench::McpBench),
    /// What `afr hook claude-code` adds to a coding agent's tool call (a pre- and a post-tool
    /// hook spawned to exit, `afr serve` running), beside a no-op hook.
    Hook(hook_bench::HookBench),
    /// Tool spans over OTLP/HTTP protobuf into `afr otlp`, beside the same events POSTed to
    /// `afr serve`: spans per second.
    Otlp(otlp_bench::OtlpBench),
    /// The growth curve: 1M and 10M events recorded, anchored on anvil, exported, verified,
    /// queried and disclosed; figures, growth exponents and a plot.
    Scale(scale_bench::ScaleBench),
    /// The independent roots (issue #32) per sealed epoch: checkpoint build, sign and
    /// consistency proof; round trips to two real `afr witness serve`; their CPU per
    /// cosignature; RFC 3161 round trips; whole `afr witness` passes.
    Witness(witness_bench::WitnessBench),
    /// The anchor proofs (issue #33) on a real anvil: the proven fetch beside the bare
    /// answers read before it, time and bytes added per anchored epoch, the archive's size
    /// and its offline re-check, for 1 and 100 epochs per transaction.
    Anchors(anchors_bench::AnchorsBench),
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "afr-eval: error: {}",
                afr_eval::esc(afr_core::redact_urls_in(&format!("{e:#}")))
            );
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.cmd {
        Cmd::Eval(a) => report::run(&a),
        Cmd::Cost(a) => cost::run(&a),
        Cmd::Rq4 {
            background,
            seed,
            json,
        } => {
            let rep = scenarios::rq4(background, seed, None)?;
            if json {
                println!("{}", serde_json::to_string(&rep)?);
            } else {
                scenarios::print(&rep);
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Matrix { seeds, json } => {
            let m = matrix::run(seeds)?;
            if json {
                println!("{}", m.to_json());
            } else {
                print!("{}", m.table(seeds));
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Gen { events, seed } => {
            let out = std::io::stdout();
            let mut out = BufWriter::new(out.lock());
            for ev in synth::generate(events, seed) {
                serde_json::to_writer(&mut out, &ev)?;
                out.write_all(b"\n")?;
            }
            out.flush()?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Bench {
            what: BenchCmd::Record(b),
        } => bench::record(&b),
        Cmd::Bench {
            what: BenchCmd::Query(b),
        } => query_bench::bench(&b),
        Cmd::Bench {
            what: BenchCmd::Serve(b),
        } => serve_bench::run(&b),
        Cmd::Bench {
            what: BenchCmd::Mcp(b),
        } => mcp_bench::run(&b),
        Cmd::Bench {
            what: BenchCmd::Hook(b),
        } => hook_bench::run(&b),
        Cmd::Bench {
            what: BenchCmd::Otlp(b),
        } => otlp_bench::run(&b),
        Cmd::Bench {
            what: BenchCmd::Scale(b),
        } => scale_bench::run(&b),
        Cmd::Bench {
            what: BenchCmd::Witness(b),
        } => witness_bench::run(&b),
        Cmd::Bench {
            what: BenchCmd::Anchors(b),
        } => anchors_bench::run(&b),
    }
}
