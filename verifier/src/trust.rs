//! What a verifier is asked to trust: one chain, one contract, and the recorders of named
//! parties.
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
//! A trust file is TOML:
//!
//! ```toml
//! chain_id = 10                       # required unless --chain-id is given
//! contract = "0x…"                    # optional; the canonical address by default
//!
//! [[party]]
//! name = "Acme Corp (operator)"
//! recorders = ["0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"]
//! ```

use afr_core::RecorderId;
use serde::Deserialize;

use crate::{
    error::{UsageError, VerifyError},
    verdict::parse_addr,
};

/// A party and the recorder addresses it answers for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Party {
    /// Its name, as the trust file gives it (`--recorder` for a recorder given on the command
    /// line).
    pub name: String,
    /// Its recorders.
    pub recorders: Vec<RecorderId>,
}

/// The pinned chain, contract and recorders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trust {
    /// The chain id, when pinned.
    pub chain_id: Option<u64>,
    /// The anchor contract.
    pub contract: [u8; 20],
    /// The parties whose recorders are trusted; empty when no recorder is pinned.
    pub parties: Vec<Party>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustFile {
    chain_id: Option<u64>,
    contract: Option<String>,
    #[serde(default)]
    party: Vec<PartyFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PartyFile {
    name: String,
    recorders: Vec<String>,
}

/// The canonical AfrAnchor address.
pub fn canonical_contract() -> [u8; 20] {
    let mut a = [0u8; 20];
    // The constant is 0x + 40 hex digits; a test keeps it so.
    let _ = hex::decode_to_slice(&afr_core::deployment::ANCHOR_ADDRESS[2..], &mut a);
    a
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
        let mut t = Trust {
            chain_id,
            contract: match contract {
                Some(c) => parse_addr(c, "--contract")?,
                None => canonical_contract(),
            },
            parties: Vec::new(),
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
        Ok(t)
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
