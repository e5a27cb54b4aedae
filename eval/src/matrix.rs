//! The tamper matrix: every attack class against three cumulative verifier configurations.
//!
//! ```text
//!   chain only       verify_log_layers(file, Layers::CHAIN_ONLY)   hash-chain links, commitments
//!   chain + Merkle   verify_log_layers(file, Layers::ALL)          + trees, headers, back-pointers
//!   full             Layers::ALL + check_recorder(pinned) + check_anchors(roots anchored
//!                    before the attack)
//! ```
//!
//! Bundles have no chain-only mode: their middle column is `verify_bundle` alone and their
//! last column adds the anchors. Each seed builds one honest history, anchors all its epochs
//! or all but the last one or two (the compromise window), and applies every attack class
//! once at random positions; the honest log and an honest bundle, fully anchored, are the
//! false-positive controls.

use std::collections::BTreeMap;

use afr_core::{
    Hash32,
    bundle::verify_bundle,
    verify::{Layers, Outcome, verify_log_layers},
};
use anyhow::Result;

use afr_verify::{
    Verdict,
    anchors::Anchors,
    check_anchors, check_recorder,
    trust::{Party, Trust},
};

use crate::tamper::{self, Attack, Evidence, History, Rng};

/// Seeds the CLI runs by default (one honest log and 19 attacks each).
pub const DEFAULT_SEEDS: u64 = 500;

/// Column names.
pub const CONFIGS: [&str; 3] = ["chain only", "chain + Merkle", "full (anchored)"];

/// What the three configurations said about one file (`None`: not applicable).
#[derive(Debug, Clone)]
pub struct Case {
    /// The attack, or `None` for an honest control.
    pub attack: Option<Attack>,
    /// Whether the file is a bundle.
    pub bundle: bool,
    /// Outcomes per configuration.
    pub outcomes: [Option<Outcome>; 3],
    /// Lowest honest epoch the attack changed.
    pub touched: u64,
    /// Highest epoch anchored before the attack, if any.
    pub last_anchored: Option<u64>,
    /// The tampered log is a shorter honest log: its roots are a strict prefix of the honest
    /// roots. Dropping only unanchored epochs this way cannot be detected by anyone.
    pub honest_prefix: bool,
}

impl Case {
    /// Whether anchoring was in a position to catch the attack.
    pub fn touches_anchored(&self) -> bool {
        self.last_anchored.is_some_and(|l| self.touched <= l)
    }
}

fn anchors_of(recorder: &[u8; 20], roots: &[Hash32], anchored: usize) -> Anchors {
    let contract = Trust::new(None, None, None, None)
        .map(|t| t.contract_hex())
        .unwrap_or_default();
    Anchors::assumed(31337, &contract, recorder, &roots[..anchored], 1)
}

/// The trust of the full configuration: the honest recorder, pinned.
fn pinned(recorder: &[u8; 20]) -> Trust {
    Trust {
        chain_id: Some(31337),
        contract: afr_verify::trust::canonical_contract(),
        parties: vec![Party {
            name: "operator".into(),
            recorders: vec![*recorder],
        }],
        require_signed_approvals: false,
        approvers: Vec::new(),
        roots: afr_verify::roots::RootsPolicy::default(),
        chain: afr_verify::trust::ChainPolicy::default(),
    }
}

/// Verifies one file in the three configurations.
fn evaluate(
    ev: &Evidence,
    a: &Anchors,
    trust: &Trust,
) -> Result<([Option<Outcome>; 3], Vec<Hash32>)> {
    match ev {
        Evidence::Log(b) => {
            let chain = verify_log_layers(b, Layers::CHAIN_ONLY).outcome;
            let rep = verify_log_layers(b, Layers::ALL);
            let mut v = Verdict::from_log(&rep);
            check_recorder(&mut v, trust);
            if v.outcome != Outcome::Tampered {
                check_anchors(&mut v, a, true)?;
            }
            v.settle();
            let roots = rep.epoch_roots.iter().map(|(_, r)| *r).collect();
            Ok(([Some(chain), Some(rep.outcome), Some(v.outcome)], roots))
        }
        Evidence::Bundle(b) => {
            let rep = verify_bundle(b);
            let mut v = Verdict::from_bundle(&rep);
            check_recorder(&mut v, trust);
            if v.outcome != Outcome::Tampered {
                check_anchors(&mut v, a, false)?;
            }
            v.settle();
            Ok(([None, Some(rep.outcome), Some(v.outcome)], Vec::new()))
        }
    }
}

/// Every case of one seed: two honest controls, then one case per attack class.
pub fn cases(seed: u64) -> Result<Vec<Case>> {
    let mut rng = Rng::new(seed);
    let mut recorder = [0u8; 20];
    recorder[..8].copy_from_slice(&seed.to_be_bytes());
    recorder[19] = 0xaf;
    let mut history = History::random(&mut rng, recorder);
    let honest = history.seal();
    let mut other_id = recorder;
    other_id[19] = 0xbe;
    let other = History::random(&mut rng, other_id).seal();
    let roots = honest.roots();
    let disclosed = tamper::disclosed(&mut rng, &honest);

    let full = anchors_of(&recorder, &roots, roots.len());
    let trust = pinned(&recorder);
    let mut out = Vec::new();
    for ev in [
        Evidence::Log(honest.export()),
        Evidence::Bundle(honest.bundle(&disclosed).encode()),
    ] {
        let bundle = matches!(ev, Evidence::Bundle(_));
        let (outcomes, _) = evaluate(&ev, &full, &trust)?;
        out.push(Case {
            attack: None,
            bundle,
            outcomes,
            touched: u64::MAX,
            last_anchored: full.head,
            honest_prefix: false,
        });
    }

    // The compromise window: half the seeds have every epoch anchored, the rest all but the
    // last one or two (at least one epoch stays anchored).
    let window = match rng.below(4) {
        0 | 1 => 0,
        2 => 1,
        _ => 2,
    };
    let anchored = roots.len().saturating_sub(window).max(1);
    let a = anchors_of(&recorder, &roots, anchored);
    for attack in Attack::ALL {
        let t = tamper::apply(attack, &mut rng, &history, &honest, &other, &disclosed);
        let (outcomes, got) = evaluate(&t.evidence, &a, &trust)?;
        out.push(Case {
            attack: Some(attack),
            bundle: attack.on_bundle(),
            outcomes,
            touched: t.touched,
            last_anchored: a.head,
            honest_prefix: got.len() < roots.len() && roots.starts_with(&got),
        });
    }
    Ok(out)
}

/// Counts of one cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cell {
    /// Cases.
    pub n: u64,
    /// Answered tampered.
    pub tampered: u64,
    /// Answered incomplete.
    pub incomplete: u64,
}

impl Cell {
    fn add(&mut self, o: Outcome) {
        self.n += 1;
        match o {
            Outcome::Tampered => self.tampered += 1,
            Outcome::Incomplete => self.incomplete += 1,
            Outcome::Verified => {}
        }
    }

    fn pct(x: u64, n: u64) -> f64 {
        if n == 0 {
            0.0
        } else {
            100.0 * x as f64 / n as f64
        }
    }

    /// `tampered%`, with `+incomplete%` when any.
    fn render(&self) -> String {
        let t = format!("{:.1}%", Cell::pct(self.tampered, self.n));
        if self.incomplete == 0 {
            t
        } else {
            format!("{t} +{:.1}% inc", Cell::pct(self.incomplete, self.n))
        }
    }
}

/// One row: an attack class (or an honest control) across the configurations.
#[derive(Debug, Clone)]
pub struct Row {
    /// Label.
    pub label: &'static str,
    /// Whether this row is an honest control (cells then count false positives).
    pub honest: bool,
    /// Cells per configuration; `None` where the configuration does not apply.
    pub cells: [Option<Cell>; 3],
    /// Cases the full configuration passed as verified because the result is an honest
    /// shorter log that only lost unanchored epochs.
    pub undetectable: u64,
    /// The paper's figures for `(chain only, full)`, where it has them.
    pub paper: (Option<&'static str>, Option<&'static str>),
}

/// The whole matrix.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// Rows in table order.
    pub rows: Vec<Row>,
    /// Tampered cases.
    pub tampered_cases: u64,
    /// Honest cases.
    pub honest_cases: u64,
}

fn paper(a: Option<Attack>) -> (Option<&'static str>, Option<&'static str>) {
    match a {
        Some(
            Attack::EditRecordByte
            | Attack::EditRecordField
            | Attack::EditPayloadByte
            | Attack::EditResealed
            | Attack::Delete,
        ) => (Some("90%"), Some("100%")),
        Some(Attack::Swap | Attack::Move | Attack::Fork) => (None, Some("100%")),
        None => (None, Some("0 FP")),
        _ => (None, None),
    }
}

/// Aggregates cases into the matrix.
pub fn aggregate(cases: &[Case]) -> Matrix {
    let mut rows: BTreeMap<usize, Row> = BTreeMap::new();
    let (mut tampered_cases, mut honest_cases) = (0, 0);
    for c in cases {
        let (idx, label) = match c.attack {
            None if c.bundle => (Attack::ALL.len() + 1, "honest bundle (false positives)"),
            None => (Attack::ALL.len(), "honest log (false positives)"),
            Some(a) => (
                Attack::ALL.iter().position(|x| *x == a).unwrap_or(0),
                a.name(),
            ),
        };
        if c.attack.is_some() {
            tampered_cases += 1;
        } else {
            honest_cases += 1;
        }
        let row = rows.entry(idx).or_insert_with(|| Row {
            label,
            honest: c.attack.is_none(),
            cells: [None; 3],
            undetectable: 0,
            paper: paper(c.attack),
        });
        for (cell, o) in row.cells.iter_mut().zip(c.outcomes) {
            if let Some(o) = o {
                cell.get_or_insert_with(Cell::default).add(o);
            }
        }
        if c.outcomes[2] == Some(Outcome::Verified) && c.honest_prefix {
            row.undetectable += 1;
        }
    }
    Matrix {
        rows: rows.into_values().collect(),
        tampered_cases,
        honest_cases,
    }
}

/// Runs `seeds` seeds (0..seeds) and aggregates them.
pub fn run(seeds: u64) -> Result<Matrix> {
    let mut all = Vec::new();
    for s in 0..seeds {
        all.extend(cases(s)?);
    }
    Ok(aggregate(&all))
}

impl Matrix {
    /// The human table.
    pub fn table(&self, seeds: u64) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "tamper matrix: {seeds} seeds, {} tampered and {} honest cases",
            self.tampered_cases, self.honest_cases
        );
        let _ = writeln!(
            s,
            "cells: detected as tampered (+ answered incomplete); honest rows: false positives\n"
        );
        let _ = writeln!(
            s,
            "{:<34} {:>5}  {:<18} {:<18} {:<18} {:<10} paper chain/full",
            "attack class", "cases", CONFIGS[0], CONFIGS[1], CONFIGS[2], "undetect."
        );
        let _ = writeln!(s, "{}", "-".repeat(125));
        for r in &self.rows {
            let n = r.cells.iter().flatten().map(|c| c.n).next().unwrap_or(0);
            let cells: Vec<String> = r
                .cells
                .iter()
                .map(|c| match c {
                    None => "n/a".into(),
                    Some(c) if r.honest => format!("{} FP", c.tampered + c.incomplete),
                    Some(c) => c.render(),
                })
                .collect();
            let paper = format!(
                "{} / {}",
                r.paper.0.unwrap_or("-"),
                r.paper.1.unwrap_or("-")
            );
            let _ = writeln!(
                s,
                "{:<34} {:>5}  {:<18} {:<18} {:<18} {:<10} {}",
                r.label, n, cells[0], cells[1], cells[2], r.undetectable, paper
            );
        }
        let _ = writeln!(
            s,
            "\nundetect.: full said verified because the result is an honest shorter log that lost\n\
             only unanchored epochs (indistinguishable from an earlier export, by construction)."
        );
        s
    }

    /// One JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        let cell = |c: &Option<Cell>| {
            c.map(|c| serde_json::json!({"cases": c.n, "tampered": c.tampered, "incomplete": c.incomplete}))
        };
        serde_json::json!({
            "tampered_cases": self.tampered_cases,
            "honest_cases": self.honest_cases,
            "configurations": CONFIGS,
            "rows": self.rows.iter().map(|r| serde_json::json!({
                "class": r.label,
                "honest": r.honest,
                "chain_only": cell(&r.cells[0]),
                "chain_merkle": cell(&r.cells[1]),
                "full": cell(&r.cells[2]),
                "undetectable_honest_prefix": r.undetectable,
                "paper_chain_only": r.paper.0,
                "paper_full": r.paper.1,
            })).collect::<Vec<_>>(),
        })
    }
}
