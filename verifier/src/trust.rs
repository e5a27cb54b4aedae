//! What a verifier is asked to trust: one chain, one contract, the recorders of named parties,
//! and the keys of the people who approve actions for them.
//!
//! A verdict of *verified* means "these bytes are what a recorder you named anchored on the
//! chain you named", so each of the three is pinned before anything is compared:
//!
//! - **chain**: `--chain-id` (or `chain_id` in a trust file), compared with `eth_chainId` and
//!   with an anchors file's chain id;
//! - **contract**: the canonical AfrAnchor address ([`afr_core::deployment::ANCHOR_ADDRESS`])
//!   unless another is named explicitly, which the report then says;
//! - **recorders**: `--recorder` or the parties of a trust file. Without one the best answer is
//!   *incomplete*: any fresh key can anchor an invented history of its own.
//!
//! Signed human approvals (`docs/spec/approvals.md`) are attributed through the same file: each
//! party may pin approvers, each with the keys that sign for them (Ethereum addresses for
//! EIP-712, OpenSSH public keys for `ssh-keygen -Y sign`). A signature by any other key is
//! tampered; with no approver pinned anywhere, a signed approval is attributed to no one (a
//! note). `require_signed_approvals` makes an unsigned approval, or a signed one that cannot
//! be attributed, leave the answer incomplete. Two parties of one file must not share a name.
//!
//! A trust file is TOML:
//!
//! ```toml
//! chain_id = 10                       # required unless --chain-id is given
//! contract = "0x…"                    # optional; the canonical address by default
//! require_signed_approvals = true     # optional; false by default
//!
//! [[party]]
//! name = "Acme Corp (operator)"
//! recorders = ["0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"]
//!
//! [[party.approver]]                  # optional, any number per party
//! name = "j.doe@acme.example"
//! keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI…", "0x70997970c51812dc3a010c7d01b50e0d17dc79c8"]
//! ```
//!
//! A case file (`afr-verify case`, [`crate::case`]) is a trust file whose parties also list
//! their `bundles` and `anchors` files ([`Trust::case`]); a plain trust file must not.
//!
//! Keys are kept in their canonical form ([`afr_core::approval::canonical_signer`]): an address
//! in lower case, an OpenSSH key without its comment. One key belongs to one approver.

use afr_core::{
    RecorderId,
    approval::{Scheme, canonical_signer, signer_scheme},
};
use serde::Deserialize;

use crate::{
    error::{ApproverName, UsageError, VerifyError},
    verdict::parse_addr,
};

pub use afr_core::approval::SSH_KEY_TYPES;

/// A party and the recorder addresses it answers for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Party {
    /// Its name, as the trust file gives it (`--recorder` for a recorder given on the command
    /// line).
    pub name: String,
    /// Its recorders.
    pub recorders: Vec<RecorderId>,
}

/// A person whose keys sign approvals, and the party they approve for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approver {
    /// Their name, as the trust file gives it.
    pub name: String,
    /// The party whose `[[party.approver]]` pins them.
    pub party: String,
    /// Their keys, canonical ([`afr_core::approval::canonical_signer`]).
    pub keys: Vec<String>,
}

/// The pinned chain, contract, recorders and approvers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trust {
    /// The chain id, when pinned.
    pub chain_id: Option<u64>,
    /// The anchor contract.
    pub contract: [u8; 20],
    /// The parties whose recorders are trusted; empty when no recorder is pinned.
    pub parties: Vec<Party>,
    /// Whether an unsigned approval leaves the answer incomplete (`require_signed_approvals`).
    pub require_signed_approvals: bool,
    /// The approvers of every party of the trust file; empty when none is pinned. `--recorder`
    /// narrows the recorders, not the approvers: who may approve does not depend on which
    /// recorder wrote the file.
    pub approvers: Vec<Approver>,
    /// Which independent roots must hold, and the witnesses, TSAs and log keys they rest on
    /// (`[roots]`, [`crate::roots`]).
    pub roots: crate::roots::RootsPolicy,
    /// How the anchoring chain is read (`[chain]`): the providers, how many must agree, the
    /// depth required, whether an anchors file without proofs may count.
    pub chain: ChainPolicy,
}

/// The `[chain]` table of a trust file, and the flags that override it.
///
/// ```toml
/// [chain]
/// rpc = ["https://a.example/rpc", "https://b.example/rpc"]   # used when no --rpc is given
/// agree = "all"              # or a number: at least that many providers agree
/// min_confirmations = 12     # anchoring blocks with fewer confirmations do not count
/// unproven_anchors = false   # true: a version-2 anchors file (no proofs) counts as it is
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChainPolicy {
    /// Providers named by the trust file.
    pub rpc: Vec<String>,
    /// How many must agree (`None`: all).
    pub agree: Option<crate::providers::Agree>,
    /// Least confirmations of an anchoring block.
    pub min_confirmations: u64,
    /// Whether an anchors file without proofs is taken as it is.
    pub unproven_anchors: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChainFile {
    #[serde(default)]
    rpc: Vec<String>,
    agree: Option<toml::Value>,
    #[serde(default)]
    min_confirmations: u64,
    #[serde(default)]
    unproven_anchors: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    chain_id: Option<u64>,
    contract: Option<String>,
    #[serde(default)]
    require_signed_approvals: bool,
    #[serde(default)]
    party: Vec<PartyFile>,
    roots: Option<RootsFile>,
    chain: Option<ChainFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RootsFile {
    require: Option<Vec<String>>,
    require_any: Option<usize>,
    witness_policy: Option<String>,
    #[serde(default)]
    tsa: Vec<TsaFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TsaFile {
    name: String,
    certificates: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PartyFile {
    name: String,
    recorders: Vec<String>,
    #[serde(default)]
    approver: Vec<ApproverFile>,
    /// The checkpoint log keys of the party's recorders (`afr witness --print-vkey`).
    #[serde(default)]
    log_keys: Vec<String>,
    /// A case file's: the party's bundles ([`Evidence`]).
    bundles: Option<Vec<String>>,
    /// A case file's: the party's anchors files ([`Evidence`]).
    anchors: Option<Vec<String>>,
}

/// What a party of a case file (`afr-verify case`, [`crate::case`]) names as its evidence,
/// paths as written (relative to the case file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evidence {
    /// Its disclosure bundles.
    pub bundles: Vec<String>,
    /// Its anchors files (`afr-verify anchors`), for offline verification.
    pub anchors: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproverFile {
    name: String,
    keys: Vec<String>,
}

/// The canonical AfrAnchor address.
pub fn canonical_contract() -> [u8; 20] {
    let mut a = [0u8; 20];
    // The constant is 0x + 40 hex digits; a test keeps it so.
    let _ = hex::decode_to_slice(&afr_core::deployment::ANCHOR_ADDRESS[2..], &mut a);
    a
}

/// The `[roots]` table of trust file `name`.
fn roots_policy(name: &str, r: RootsFile) -> Result<crate::roots::RootsPolicy, VerifyError> {
    use crate::roots::{PinnedTsa, Require, RootKind, RootsPolicy};
    let bad = |why: String| UsageError::Roots {
        name: name.to_owned(),
        why,
    };
    let require = match (r.require, r.require_any) {
        (Some(_), Some(_)) => {
            return Err(bad("give require or require_any, not both".into()).into());
        }
        (None, Some(k)) if (1..=3).contains(&k) => Require::AtLeast(k),
        (None, Some(k)) => {
            return Err(bad(format!("require_any = {k}: it must be 1, 2 or 3")).into());
        }
        (Some(list), None) => {
            let mut ks = Vec::new();
            for k in &list {
                let kind = RootKind::parse(k)
                    .ok_or_else(|| bad(format!("require: {k:?} is not chain, witnesses or tsa")))?;
                if !ks.contains(&kind) {
                    ks.push(kind);
                }
            }
            if ks.is_empty() {
                return Err(bad(
                    "require is empty: name at least one of chain, witnesses, tsa".into(),
                )
                .into());
            }
            Require::All(ks)
        }
        (None, None) => Require::All(vec![RootKind::Chain]),
    };
    let witnesses = match r.witness_policy {
        Some(text) => {
            Some(afr_tlog::Policy::parse(&text).map_err(|e| bad(format!("witness_policy: {e}")))?)
        }
        None => None,
    };
    let mut tsas = Vec::new();
    for t in r.tsa {
        let certs = afr_tsa::TrustedCert::parse(t.certificates.as_bytes())
            .map_err(|e| bad(format!("tsa {:?}: {e}", t.name)))?;
        if certs.is_empty() {
            return Err(bad(format!("tsa {:?}: no certificate", t.name)).into());
        }
        tsas.push(PinnedTsa {
            name: t.name,
            certificates: t.certificates.into_bytes(),
        });
    }
    let needs = |k| matches!(&require, Require::All(ks) if ks.contains(&k));
    if needs(RootKind::Witnesses) && witnesses.is_none() {
        return Err(bad("require names witnesses but no witness_policy is given".into()).into());
    }
    if needs(RootKind::Tsa) && tsas.is_empty() {
        return Err(bad("require names tsa but no [[roots.tsa]] is pinned".into()).into());
    }
    Ok(RootsPolicy {
        require,
        witnesses,
        tsas,
        log_keys: Vec::new(),
    })
}

impl Trust {
    /// Builds the trust from an optional trust file's text (with its name) and the
    /// command-line pins; a pin given both ways must agree. Every error is
    /// [`VerifyError::Usage`].
    pub fn new(
        file: Option<(&str, &str)>,
        chain_id: Option<u64>,
        contract: Option<&str>,
        recorder: Option<&str>,
    ) -> Result<Trust, VerifyError> {
        Trust::parse(file, chain_id, contract, recorder, false).map(|(t, _)| t)
    }

    /// Builds the trust from a case file's text (with its name) and the command-line pins, as
    /// [`Trust::new`] does, and returns each party's [`Evidence`], in the order of
    /// [`Trust::parties`]. Every error is [`VerifyError::Usage`].
    pub fn case(
        file: (&str, &str),
        chain_id: Option<u64>,
        contract: Option<&str>,
    ) -> Result<(Trust, Vec<Evidence>), VerifyError> {
        Trust::parse(Some(file), chain_id, contract, None, true)
    }

    fn parse(
        file: Option<(&str, &str)>,
        chain_id: Option<u64>,
        contract: Option<&str>,
        recorder: Option<&str>,
        case: bool,
    ) -> Result<(Trust, Vec<Evidence>), VerifyError> {
        let mut evidence = Vec::new();
        let mut t = Trust {
            chain_id,
            contract: match contract {
                Some(c) => parse_addr(c, "--contract")?,
                None => canonical_contract(),
            },
            parties: Vec::new(),
            require_signed_approvals: false,
            approvers: Vec::new(),
            roots: crate::roots::RootsPolicy::default(),
            chain: ChainPolicy::default(),
        };
        if let Some((name, text)) = file {
            let name = name.to_owned();
            let f: TrustFile =
                toml::from_str(text).map_err(|source| UsageError::TrustFileSyntax {
                    name: name.clone(),
                    source: Box::new(source),
                })?;
            if let Some(c) = f.chain_id {
                if let Some(pinned) = chain_id.filter(|x| *x != c) {
                    return Err(UsageError::ChainIdConflict {
                        pinned,
                        file: c,
                        name,
                    }
                    .into());
                }
                t.chain_id = Some(c);
            }
            t.require_signed_approvals = f.require_signed_approvals;
            if let Some(r) = f.roots {
                t.roots = roots_policy(&name, r)?;
            }
            if let Some(c) = f.chain {
                let agree = match &c.agree {
                    None => None,
                    Some(v) => Some(
                        v.as_str()
                            .map(str::to_owned)
                            .or_else(|| v.as_integer().map(|k| k.to_string()))
                            .unwrap_or_default()
                            .parse()
                            .map_err(|why| UsageError::Providers {
                                what: format!("trust file {name}: [chain] agree"),
                                why,
                            })?,
                    ),
                };
                t.chain = ChainPolicy {
                    rpc: c.rpc,
                    agree,
                    min_confirmations: c.min_confirmations,
                    unproven_anchors: c.unproven_anchors,
                };
            }
            if let Some(c) = &f.contract {
                let c = parse_addr(c, &format!("contract in {name}"))?;
                if contract.is_some() && c != t.contract {
                    return Err(UsageError::ContractConflict { name }.into());
                }
                t.contract = c;
            }
            if f.party.is_empty() {
                return Err(UsageError::NoParty { name }.into());
            }
            for p in f.party {
                if t.parties.iter().any(|q| q.name == p.name) {
                    return Err(UsageError::PartyTwice {
                        party: p.name,
                        name,
                    }
                    .into());
                }
                if !case && (p.bundles.is_some() || p.anchors.is_some()) {
                    return Err(UsageError::EvidenceInTrustFile {
                        party: p.name,
                        name,
                    }
                    .into());
                }
                evidence.push(Evidence {
                    bundles: p.bundles.unwrap_or_default(),
                    anchors: p.anchors.unwrap_or_default(),
                });
                if p.recorders.is_empty() {
                    return Err(UsageError::PartyWithoutRecorders {
                        party: p.name,
                        name,
                    }
                    .into());
                }
                let recorders = p
                    .recorders
                    .iter()
                    .map(|r| parse_addr(r, &format!("recorder of party {:?}", p.name)))
                    .collect::<Result<Vec<_>, _>>()?;
                for r in &recorders {
                    if let Some(q) = t.parties.iter().find(|q| q.recorders.contains(r)) {
                        return Err(UsageError::RecorderTwice {
                            recorder: *r,
                            first: q.name.clone(),
                            second: p.name,
                            name,
                        }
                        .into());
                    }
                }
                for a in p.approver {
                    t.pin_approver(&name, &p.name, a)?;
                }
                for k in &p.log_keys {
                    let key = afr_tlog::VerifierKey::parse(k).map_err(|e| UsageError::Roots {
                        name: name.clone(),
                        why: format!("log key of party {:?}: {e}", p.name),
                    })?;
                    t.roots.log_keys.push(key);
                }
                t.parties.push(Party {
                    name: p.name,
                    recorders,
                });
            }
        }
        if let Some(r) = recorder {
            let r = parse_addr(r, "--recorder")?;
            if !t.parties.is_empty() && t.party_of(&r).is_none() {
                return Err(UsageError::RecorderNotTrusted { recorder: r }.into());
            }
            // `--recorder` narrows a trust file to one recorder, or pins it alone.
            t.parties = match t.party_of(&r) {
                Some(p) => vec![Party {
                    name: p.name.clone(),
                    recorders: vec![r],
                }],
                None => vec![Party {
                    name: "--recorder".into(),
                    recorders: vec![r],
                }],
            };
        }
        Ok((t, evidence))
    }

    /// Pins approver `a` of `party` (trust file `name`): every key canonical, none pinned
    /// before (for this approver or another).
    fn pin_approver(
        &mut self,
        name: &str,
        party: &str,
        a: ApproverFile,
    ) -> Result<(), VerifyError> {
        let who = || ApproverName {
            approver: a.name.clone(),
            party: party.to_owned(),
        };
        let name = name.to_owned();
        if a.keys.is_empty() {
            return Err(UsageError::ApproverWithoutKeys { who: who(), name }.into());
        }
        let mut keys: Vec<String> = Vec::with_capacity(a.keys.len());
        for key in &a.keys {
            let Some(k) = canonical_signer(key) else {
                return Err(UsageError::BadApproverKey {
                    key: key.clone(),
                    who: who(),
                    name,
                }
                .into());
            };
            let kind = k.split_once(' ').map_or("", |(t, _)| t);
            if signer_scheme(&k) == Scheme::Ssh && !SSH_KEY_TYPES.contains(&kind) {
                return Err(UsageError::UnsupportedApproverKey {
                    key_type: kind.to_owned(),
                    who: who(),
                    name,
                }
                .into());
            }
            if let Some(o) = self.approver_of(&k) {
                return Err(UsageError::ApproverKeyTwice {
                    key: k,
                    who: who(),
                    first: Box::new(ApproverName {
                        approver: o.name.clone(),
                        party: o.party.clone(),
                    }),
                    name,
                }
                .into());
            }
            // The same key twice for one approver says nothing new.
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        self.approvers.push(Approver {
            name: a.name,
            party: party.to_owned(),
            keys,
        });
        Ok(())
    }

    /// The pinned approver who holds `signer` (canonical), if any.
    pub fn approver_of(&self, signer: &str) -> Option<&Approver> {
        self.approvers
            .iter()
            .find(|a| a.keys.iter().any(|k| k == signer))
    }

    /// The party that answers for `recorder`, if it is pinned.
    pub fn party_of(&self, recorder: &RecorderId) -> Option<&Party> {
        self.parties.iter().find(|p| p.recorders.contains(recorder))
    }

    /// Whether the contract is the canonical AfrAnchor address.
    pub fn canonical(&self) -> bool {
        self.contract == canonical_contract()
    }

    /// The contract as lower-case `0x` hex.
    pub fn contract_hex(&self) -> String {
        format!("0x{}", hex::encode(self.contract))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
    const B: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

    const ED: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPUzneUiWj5SDCeaDbakURUAkDQWBGZNfSd141vOTLYX";
    const P256: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBAlwidfFExt6KcyJeNtlKgh/NqnQ/5l7fsWtfHgw4tmixfR8GFBDWTwlBaTKpZe6QQi9VfNRUGQy4+YuYOU125A=";

    const P384: &str = "ecdsa-sha2-nistp384 AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBAhiNG5bBYB23z0xRE9rnMNBDHLMkDfUaeKSfXBsS/dM33dzJPgApCPJWuGVughVKfIkLKzgRNK/g85fsbWG3L5SZJpNyKopDtv8iKh7jik9pQPUKsIsz3HKEAC1Ztcsyw==";
    const RSA: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDBeY9n1waJvi1Ox2cJ5bYxQu4Noms2y+0dCPwbAFxY5O/U3zuuSPDhVgC4P+rtl/+v0wcu4xHCL1rBhe2y66VeeTvnIDkG1oJTzToSJlV0T+dHCAU9ISINaESlBJebIUqdJNhwEm681Lwgk5ut8bcdIvSwN1ibFpy3tsubAtJk3w==";

    fn file(text: &str) -> Result<Trust, VerifyError> {
        Trust::new(Some(("t.toml", text)), None, None, None)
    }

    #[test]
    fn approvers_are_pinned_per_party_with_canonical_keys() {
        let text = format!(
            "require_signed_approvals = true\n\
             [[party]]\nname = \"Acme\"\nrecorders = [\"{A}\"]\n\
             [[party.approver]]\nname = \"j.doe@acme.example\"\n\
             keys = [\"{ED} j.doe@laptop\", \"0x70997970C51812dc3A010C7d01b50e0d17dc79C8\", \"  {ED}  \"]\n\
             [[party.approver]]\nname = \"ops\"\nkeys = [\"{P256}\"]\n\
             [[party]]\nname = \"Globex\"\nrecorders = [\"{B}\"]\n"
        );
        let t = file(&text).unwrap();
        assert!(t.require_signed_approvals);
        assert_eq!(t.approvers.len(), 2);
        let j = &t.approvers[0];
        assert_eq!(
            (j.name.as_str(), j.party.as_str()),
            ("j.doe@acme.example", "Acme")
        );
        // The comment and the case are dropped, and the repeated key is kept once.
        assert_eq!(j.keys, [ED, B]);
        assert_eq!(t.approver_of(B).unwrap().name, "j.doe@acme.example");
        assert_eq!(t.approver_of(P256).unwrap().name, "ops");
        assert!(t.approver_of(A).is_none());
        // --recorder narrows the recorders, not the approvers.
        let one = Trust::new(Some(("t.toml", &text)), None, None, Some(B)).unwrap();
        assert_eq!(one.parties.len(), 1);
        assert_eq!(one.approvers, t.approvers);
        // Both are optional.
        let plain = file(&format!(
            "[[party]]\nname = \"Acme\"\nrecorders = [\"{A}\"]\n"
        ))
        .unwrap();
        assert!(!plain.require_signed_approvals);
        assert!(plain.approvers.is_empty());
        // Command-line pins alone pin no approver.
        let cli = Trust::new(None, Some(1), None, Some(A)).unwrap();
        assert!(cli.approvers.is_empty() && !cli.require_signed_approvals);
    }

    #[test]
    fn unusable_approver_keys_are_usage_errors() {
        let acme = format!("[[party]]\nname = \"Acme\"\nrecorders = [\"{A}\"]\n");
        let approver = |name: &str, keys: &str| {
            format!("[[party.approver]]\nname = \"{name}\"\nkeys = [{keys}]\n")
        };
        for (text, want) in [
            (
                format!("{acme}{}", approver("j", "")),
                "approver \"j\" of party \"Acme\" in t.toml has no keys",
            ),
            (
                format!("{acme}{}", approver("j", "\"ssh-ed25519 AAAA\"")),
                "key \"ssh-ed25519 AAAA\" of approver \"j\" of party \"Acme\" in t.toml is neither",
            ),
            (
                format!("{acme}{}", approver("j", "\"0x7099\"")),
                "key \"0x7099\" of approver \"j\"",
            ),
            (
                format!("{acme}{}", approver("j", "\"j.doe@acme.example\"")),
                "key \"j.doe@acme.example\" of approver \"j\"",
            ),
            (
                format!(
                    "{acme}{}{}",
                    approver("j", &format!("\"{ED}\"")),
                    approver("k", &format!("\"{ED} other comment\""))
                ),
                "is pinned for approver \"j\" of party \"Acme\" and again for approver \"k\" of party \"Acme\"",
            ),
            (
                format!("{acme}{}", approver("j", &format!("\"{P384}\""))),
                "a key of approver \"j\" of party \"Acme\" in t.toml is of type ecdsa-sha2-nistp384, which approvals do not support",
            ),
            (
                format!("{acme}{}", approver("j", &format!("\"{RSA}\""))),
                "a key of approver \"j\" of party \"Acme\" in t.toml is of type ssh-rsa,",
            ),
            (
                format!("{acme}[[party.approver]]\nname = \"j\"\nkeys = [\"{B}\"]\nrole = \"x\"\n"),
                "trust file t.toml",
            ),
        ] {
            let e = file(&text).unwrap_err();
            assert!(matches!(e, VerifyError::Usage(_)), "{e:?}");
            assert!(e.to_string().contains(want), "{e}\n{text}");
        }
    }

    #[test]
    fn canonical_address_parses() {
        assert_eq!(
            format!("0x{}", hex::encode(canonical_contract())),
            afr_core::deployment::ANCHOR_ADDRESS.to_ascii_lowercase()
        );
    }

    #[test]
    fn trust_files_pin_chain_contract_and_parties() {
        let text = format!(
            "chain_id = 10\n[[party]]\nname = \"Acme\"\nrecorders = [\"{A}\"]\n[[party]]\nname = \"Globex\"\nrecorders = [\"{B}\"]\n"
        );
        let t = Trust::new(Some(("t.toml", &text)), None, None, None).unwrap();
        assert_eq!(t.chain_id, Some(10));
        assert!(t.canonical());
        let b = parse_addr(B, "b").unwrap();
        assert_eq!(t.party_of(&b).unwrap().name, "Globex");
        // A conflicting pin is refused; --recorder narrows to one party.
        assert!(Trust::new(Some(("t.toml", &text)), Some(11), None, None).is_err());
        let one = Trust::new(Some(("t.toml", &text)), None, None, Some(B)).unwrap();
        assert_eq!(one.parties.len(), 1);
        assert_eq!(one.parties[0].name, "Globex");
        assert!(
            Trust::new(
                Some(("t.toml", &text)),
                None,
                None,
                Some("0x0000000000000000000000000000000000000001")
            )
            .is_err()
        );
        // Unknown keys and parties without recorders are errors, not silently ignored.
        assert!(
            Trust::new(
                Some(("t.toml", "chain_id = 1\nrecorder = \"x\"")),
                None,
                None,
                None
            )
            .is_err()
        );
        assert!(
            Trust::new(
                Some((
                    "t.toml",
                    "chain_id = 1\n[[party]]\nname = \"x\"\nrecorders = []"
                )),
                None,
                None,
                None
            )
            .is_err()
        );
    }
}
