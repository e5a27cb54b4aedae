//! A case, loaded and verified bundle by bundle: the case file or the trust and bundles, the
//! anchors files pinned to the case's chain and assigned to recorders, and every bundle read
//! against one block of the chain or its recorder's anchors file.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use afr_core::{Hash32, RecorderId};

use super::{CaseReport, Checked, hex_id, judge::judge, time::TimeSrc};
use crate::{
    Kind, Origin, PinnedSource, Source, Trust,
    anchors::Rpc,
    error::{UsageError, VerifyError},
    verify_full,
};

/// What a case holds: the trust and, for each party, its evidence.
#[derive(Debug, Clone)]
pub struct Case {
    /// The pinned chain, contract, parties and approvers.
    pub trust: Trust,
    /// For each party of [`Case::trust`] (same order), the bundles a case file lists for it.
    pub bundles: Vec<Vec<PathBuf>>,
    /// Bundles assigned to the party whose recorder made them.
    pub loose: Vec<PathBuf>,
    /// The arbiter's own anchors files (`--anchors`; any order, one per recorder), used for any
    /// recorder unless the roots are read from a chain.
    pub anchors: Vec<PathBuf>,
    /// For each party of [`Case::trust`] (same order), the anchors files the case file lists
    /// for it: used for that party's own recorders only (a party's file cannot speak for
    /// another party's recorder), and not where the arbiter gave one for the same recorder.
    pub party_anchors: Vec<Vec<PathBuf>>,
    /// Name, size and SHA-256 of the case file, as read.
    pub digest: Option<(String, u64, Hash32)>,
    /// Whether the parties name their own bundles (a case file): a party without any is then
    /// incomplete. Otherwise a party with no bundle is in the case only if a link names it.
    pub listed: bool,
    /// The case file's directory: files under it are named relative to it in the report.
    pub base: Option<PathBuf>,
}

impl Case {
    /// Reads a case file; bundles and anchors files are relative to its directory. `chain_id`
    /// and `contract` pin as for a trust file (and must agree with it). A file that is not a
    /// case file (a bundle, an export, anything not UTF-8 text) is
    /// [`UsageError::NotACaseFile`].
    pub fn load(
        path: &Path,
        chain_id: Option<u64>,
        contract: Option<&str>,
    ) -> Result<Case, VerifyError> {
        let bytes = std::fs::read(path).map_err(|source| VerifyError::Read {
            path: path.to_owned(),
            source,
        })?;
        let name = path.display().to_string();
        let not_case = |what| UsageError::NotACaseFile {
            name: name.clone(),
            what,
        };
        // Bundles given without --trust: the first one is not the case file it stands for.
        if bundle_recorder(&bytes).is_some() {
            return Err(not_case("a disclosure bundle").into());
        }
        if matches!(
            afr_core::export::LogReader::new(&bytes).next_frame(),
            Ok(Some(afr_core::export::Frame::Start { .. }))
        ) {
            return Err(not_case("a whole-log export").into());
        }
        let digest = (
            name.clone(),
            bytes.len() as u64,
            afr_core::hash::sha256(&[&bytes]),
        );
        let text = String::from_utf8(bytes).map_err(|_| not_case("not UTF-8 text"))?;
        let (trust, evidence) = Trust::case((&name, &text), chain_id, contract)?;
        let base = path.parent().unwrap_or(Path::new(""));
        Ok(Case {
            trust,
            bundles: evidence
                .iter()
                .map(|e| e.bundles.iter().map(|b| base.join(b)).collect())
                .collect(),
            loose: Vec::new(),
            anchors: Vec::new(),
            party_anchors: evidence
                .iter()
                .map(|e| e.anchors.iter().map(|a| base.join(a)).collect())
                .collect(),
            digest: Some(digest),
            listed: true,
            base: Some(base.to_owned()),
        })
    }

    /// A case of `bundles` under `trust`, each assigned to the party of its recorder.
    pub fn with_bundles(trust: Trust, bundles: Vec<PathBuf>) -> Case {
        Case {
            bundles: vec![Vec::new(); trust.parties.len()],
            party_anchors: vec![Vec::new(); trust.parties.len()],
            trust,
            loose: bundles,
            anchors: Vec::new(),
            digest: None,
            listed: false,
            base: None,
        }
    }
}

/// The recorder a bundle's start frame names, if it has one (the bundle is checked later):
/// which party and anchors file it goes with.
fn bundle_recorder(bytes: &[u8]) -> Option<RecorderId> {
    let mut r = afr_core::cbor::Reader::new(bytes);
    (r.array().ok()? == 3 && r.text().ok()? == afr_core::bundle::BUNDLE_MAGIC).then_some(())?;
    r.uint().ok()?;
    r.fixed().ok()
}

/// Verifies `case`, reading anchored roots from `src`: a chain ([`Source::Rpc`], read at one
/// block for every bundle) or the case's anchors files (with [`Source::File`], one more).
/// Errors are I/O, RPC or usage errors (nothing was decided).
pub fn verify_case(case: &Case, src: Source<'_>) -> Result<CaseReport, VerifyError> {
    let trust = &case.trust;
    let mut notes = Vec::new();
    let src = PinnedSource::of(src, trust.chain_id)?;
    // The arbiter's files first (`None`), then each party's; each pinned to the case's chain.
    let mut anchor_files: Vec<(Option<usize>, &Path)> =
        case.anchors.iter().map(|p| (None, p.as_path())).collect();
    if let Some(Origin::File(p)) = src.map(|s| s.origin()) {
        anchor_files.push((None, p));
    }
    for (i, files) in case.party_anchors.iter().enumerate() {
        anchor_files.extend(files.iter().map(|p| (Some(i), p.as_path())));
    }
    let anchor_files = anchor_files
        .into_iter()
        .map(|(by, p)| Ok((by, p, PinnedSource::new(Origin::File(p), trust.chain_id)?)))
        .collect::<Result<Vec<_>, UsageError>>()?;
    if case.loose.is_empty() && case.bundles.iter().all(Vec::is_empty) {
        return Err(UsageError::NoBundle.into());
    }
    // One block for the whole case: every bundle is read against the same chain state.
    let mut rpc = None;
    if let Some(s) = src
        && let Origin::Rpc { urls, block, .. } = s.origin()
    {
        let rpcs: Vec<Rpc> = urls.iter().map(|u| Rpc::new(u)).collect();
        let refs: Vec<&Rpc> = rpcs.iter().collect();
        let block = crate::providers::pinned_block(&refs, s.chain_id(), block)?;
        if !anchor_files.is_empty() {
            notes.push(format!(
                "anchored roots read from the chain at block {block}; the anchors files were not used"
            ));
        }
        rpc = Some(s.at_block(block));
    }
    // The anchors file of each recorder, and who gave it.
    let mut by_recorder: BTreeMap<RecorderId, (&Path, PinnedSource<'_>, Option<usize>)> =
        BTreeMap::new();
    if rpc.is_none() {
        for &(by, p, pinned) in &anchor_files {
            let a = crate::archive::Loaded::read(p)?;
            let rec =
                crate::verdict::parse_addr(a.recorder(), &format!("recorder of {}", p.display()))?;
            if let Some(i) = by {
                let lister = trust.parties.get(i);
                if !lister.is_some_and(|l| l.recorders.contains(&rec)) {
                    notes.push(format!(
                        "the anchors file {} listed by party \"{}\" is for recorder {}, which is not that party's: not used (a party's anchors count only for its own recorders)",
                        p.display(),
                        lister.map_or("?", |l| l.name.as_str()),
                        hex_id(&rec)
                    ));
                    continue;
                }
                if let Some((first, _, None)) = by_recorder.get(&rec) {
                    notes.push(format!(
                        "the anchors file {} listed by party \"{}\" for recorder {} was not used: the arbiter's {} was given for it",
                        p.display(),
                        lister.map_or("?", |l| l.name.as_str()),
                        hex_id(&rec),
                        first.display()
                    ));
                    continue;
                }
            }
            if let Some((first, _, _)) = by_recorder.insert(rec, (p, pinned, by)) {
                return Err(UsageError::AnchorsTwice {
                    recorder: rec,
                    first: first.to_owned(),
                    second: p.to_owned(),
                }
                .into());
            }
        }
    }

    // The bundles, each with the party it stands for.
    let mut jobs: Vec<(Option<usize>, &Path)> = Vec::new();
    for (i, files) in case.bundles.iter().enumerate() {
        jobs.extend(files.iter().map(|f| (Some(i), f.as_path())));
    }
    jobs.extend(case.loose.iter().map(|f| (None, f.as_path())));
    let mut checked = Vec::with_capacity(jobs.len());
    for (listed, path) in jobs {
        let bytes = std::fs::read(path).map_err(|source| VerifyError::Read {
            path: path.to_owned(),
            source,
        })?;
        let recorder = bundle_recorder(&bytes);
        let party = match listed {
            Some(i) => Some(i).filter(|i| *i < trust.parties.len()),
            None => {
                recorder.and_then(|r| trust.parties.iter().position(|p| p.recorders.contains(&r)))
            }
        };
        // Narrowed to the party it stands for: a bundle of another recorder is tampered.
        let narrowed = match party.and_then(|i| trust.parties.get(i)) {
            Some(p) => Trust {
                parties: vec![p.clone()],
                ..trust.clone()
            },
            None => trust.clone(),
        };
        let (src, time_src) = match (rpc, recorder.and_then(|r| by_recorder.get(&r))) {
            (Some(chain), _) => (Some(chain), TimeSrc::Chain),
            (None, Some((_, file, by))) => {
                (Some(*file), by.map_or(TimeSrc::Arbiter, TimeSrc::Party))
            }
            (None, None) => (None, TimeSrc::Arbiter),
        };
        let c = verify_full(Kind::Bundle, &bytes, &narrowed, src)?;
        checked.push(Checked {
            party,
            size: bytes.len() as u64,
            sha256: afr_core::hash::sha256(&[&bytes]),
            time_src,
            file: case
                .base
                .as_deref()
                .and_then(|b| path.strip_prefix(b).ok())
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(path)
                .display()
                .to_string(),
            trust: narrowed,
            verdict: c.verdict,
            report: c.bundle,
            anchors: c.anchors,
        });
    }
    Ok(judge(case, checked, notes))
}
