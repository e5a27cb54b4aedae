//! What can stop `afr-verify` before it decides: one enum, one variant per failure a caller
//! may branch on.
//!
//! A verdict (verified, tampered, incomplete) is never an error: every property of the file is
//! in the [`Verdict`](crate::Verdict). An error means nothing was decided, and says why:
//!
//! ```text
//!  Usage(_)                    a pin is missing, malformed or contradicts another, a party
//!                              is named twice, an approver's key is unusable or pinned
//!                              twice, or a case file is not one (a bundle given first
//!                              without --trust) (exit 64)
//!  ChainMismatch               the endpoint serves another chain than the pinned one
//!  Transport, Response,        the endpoint could not be reached or read, or refused a call
//!  RpcFailed
//!  Malformed(_)                the endpoint's answer is not the JSON-RPC it should be
//!  TooManyLogCalls,            the endpoint's answers are too large, or contradict each other
//!  TooManyAnchors,
//!  InconsistentAnchors
//!  Read                        a file to verify (a bundle, a case file) cannot be read
//!  AnchorsRead, AnchorsParse,  an anchors file cannot be read, or is not one
//!  AnchorsVersion,
//!  AnchorsRecorder
//!  Artifact                    the contract artifact built in is unusable (a build error)
//! ```
//!
//! `afr-verify` exits 64 on `Usage` and 74 on everything else.
//!
//! No error holds an endpoint URL as given: URLs are kept as [`RedactedUrl`], and text that
//! came back from a transport is passed through [`afr_core::redact_urls_in`], so an API key in a
//! URL's path or query never reaches a message.

use std::{fmt, num::ParseIntError, path::PathBuf};

use afr_core::RecorderId;

use crate::anchors::{ANCHORS_FILE_VERSION, MAX_EPOCHS, MAX_LOG_CALLS, MAX_RESPONSE};

/// Why `afr-verify` decided nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// What was asked cannot be done as asked: a pin is missing, malformed or contradicts
    /// another. Nothing was read from the file or the chain.
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// The endpoint serves another chain than the pinned one: nothing was checked.
    #[error(
        "the endpoint serves chain {served}, not the pinned chain {pinned}; nothing was checked"
    )]
    ChainMismatch {
        /// What `eth_chainId` answered.
        served: u64,
        /// The pinned chain.
        pinned: u64,
    },
    /// The endpoint could not be reached, or the request failed in transport.
    #[error("{call} to {url}: {detail}")]
    Transport {
        /// The call, e.g. `rpc eth_chainId` or `rpc batch of 3 calls`.
        call: String,
        /// The endpoint, redacted.
        url: RedactedUrl,
        /// What the transport said, with any URL in it redacted.
        detail: String,
    },
    /// The endpoint's response could not be read, or is larger than [`MAX_RESPONSE`].
    #[error("{call}: response unreadable or over {MAX_RESPONSE} bytes: {detail}")]
    Response {
        /// The call.
        call: String,
        /// What the transport said, with any URL in it redacted.
        detail: String,
    },
    /// The endpoint answered a call with a JSON-RPC error object.
    #[error("rpc {method} failed: {error}")]
    RpcFailed {
        /// The JSON-RPC method.
        method: String,
        /// The error object, as JSON, with any URL in it redacted.
        error: String,
    },
    /// The endpoint's answer is not the JSON-RPC it should be.
    #[error(transparent)]
    Malformed(#[from] Malformed),
    /// Reading the logs needs more than [`MAX_LOG_CALLS`] `eth_getLogs` calls.
    #[error(
        "eth_getLogs: more than {MAX_LOG_CALLS} calls needed; narrow the range with --from-block"
    )]
    TooManyLogCalls,
    /// The endpoint returned more than [`MAX_EPOCHS`] `Anchored` logs for one recorder.
    #[error("more than {MAX_EPOCHS} Anchored logs for one recorder; refused")]
    TooManyAnchors,
    /// The endpoint reports two successful anchoring transactions for one epoch, which the
    /// genuine contract never accepts: it is not answering for the chain it claims.
    #[error(
        "the endpoint reports two anchoring transactions for epoch {epoch} ({first} and {second}); its answers are inconsistent"
    )]
    InconsistentAnchors {
        /// The epoch.
        epoch: u64,
        /// One transaction.
        first: String,
        /// The other.
        second: String,
    },
    /// A file given to verify (a bundle or a case file) cannot be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An anchors file cannot be read.
    #[error("cannot read {}", path.display())]
    AnchorsRead {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file is not an anchors file.
    #[error("{} is not an anchors file", path.display())]
    AnchorsParse {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// An anchors file of another version.
    #[error(
        "{} is an anchors file of version {version}; this verifier reads version {ANCHORS_FILE_VERSION} (fetch it again with `afr-verify anchors`)",
        path.display()
    )]
    AnchorsVersion {
        /// The file.
        path: PathBuf,
        /// Its version.
        version: u64,
    },
    /// The anchors' recorder is not an address.
    #[error("anchors file recorder must be 0x followed by 40 hex digits")]
    AnchorsRecorder {
        /// Why.
        #[source]
        source: hex::FromHexError,
    },
    /// Anchoring evidence that contradicts itself (two proven roots for one epoch): the chain
    /// it was read from is not the one it claims, or the contract not the genuine one.
    #[error("the anchoring evidence contradicts itself: {why}")]
    Evidence {
        /// What contradicts what.
        why: String,
    },
    /// The AfrAnchor artifact built into this verifier has no runtime code (a build error; a
    /// unit test keeps it from shipping).
    #[error("no deployedBytecode in the artifact")]
    Artifact,
}

/// A pin that is missing, malformed or contradicts another: `afr-verify` exits 64.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// A source of anchored roots was given without a pinned chain.
    #[error("{flag} needs a pinned chain: give --chain-id or a trust file with chain_id")]
    ChainNotPinned {
        /// `--rpc` or `--anchors`.
        flag: &'static str,
    },
    /// An address that is not `0x` followed by 40 hex digits.
    #[error("{what} must be 0x followed by 40 hex digits")]
    BadAddress {
        /// Which address (`--recorder`, `contract in trust.toml`, ...).
        what: String,
        /// Why.
        #[source]
        source: hex::FromHexError,
    },
    /// A trust file that is not valid TOML of the expected shape.
    #[error("trust file {name}")]
    TrustFileSyntax {
        /// The file.
        name: String,
        /// Why.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// `--chain-id` and the trust file's `chain_id` differ.
    #[error("--chain-id {pinned} differs from chain_id {file} in {name}")]
    ChainIdConflict {
        /// `--chain-id`.
        pinned: u64,
        /// The trust file's `chain_id`.
        file: u64,
        /// The trust file.
        name: String,
    },
    /// `--contract` and the trust file's `contract` differ.
    #[error("--contract differs from the contract in {name}")]
    ContractConflict {
        /// The trust file.
        name: String,
    },
    /// A `[roots]` table or a log key that cannot be used.
    #[error("trust file {name}: [roots]: {why}")]
    Roots {
        /// The trust file.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// An agreement rule that the providers given cannot meet, or a `[chain]` table that
    /// cannot be used.
    #[error("{what}: {why}")]
    Providers {
        /// `--agree`, or `trust file NAME: [chain]`.
        what: String,
        /// What is wrong.
        why: String,
    },
    /// A trust file without parties.
    #[error("trust file {name} names no [[party]] with recorders")]
    NoParty {
        /// The trust file.
        name: String,
    },
    /// A party without recorders.
    #[error("party {party:?} in {name} has no recorders")]
    PartyWithoutRecorders {
        /// The party.
        party: String,
        /// The trust file.
        name: String,
    },
    /// An approver without keys: nothing they sign could be attributed to them.
    #[error("{who} in {name} has no keys")]
    ApproverWithoutKeys {
        /// The approver.
        who: ApproverName,
        /// The trust file.
        name: String,
    },
    /// An approver's key that is neither an Ethereum address nor an OpenSSH public key.
    #[error(
        "key {key:?} of {who} in {name} is neither an Ethereum address (0x and 40 hex digits) nor an OpenSSH public key"
    )]
    BadApproverKey {
        /// The key as given.
        key: String,
        /// The approver.
        who: ApproverName,
        /// The trust file.
        name: String,
    },
    /// An approver's OpenSSH key of a type approvals are not signed with.
    #[error(
        "a key of {who} in {name} is of type {key_type}, which approvals do not support (ssh-ed25519, ecdsa-sha2-nistp256, sk-ssh-ed25519@openssh.com, sk-ecdsa-sha2-nistp256@openssh.com)"
    )]
    UnsupportedApproverKey {
        /// The key's type.
        key_type: String,
        /// The approver.
        who: ApproverName,
        /// The trust file.
        name: String,
    },
    /// One key pinned for two approvers: a signature by it could not name one of them.
    #[error("key {key} is pinned for {first} and again for {who} in {name}")]
    ApproverKeyTwice {
        /// The key, canonical.
        key: String,
        /// The approver who named it second.
        who: ApproverName,
        /// The approver who named it first.
        first: Box<ApproverName>,
        /// The trust file.
        name: String,
    },
    /// A trust file whose party names bundles or anchors files: a case file, given where a
    /// trust file is expected.
    #[error(
        "party {party:?} in {name} names bundles or anchors: that is a case file; verify it with `afr-verify case {name}`"
    )]
    EvidenceInTrustFile {
        /// The party.
        party: String,
        /// The file.
        name: String,
    },
    /// Two parties of one trust or case file with the same name: findings about one could not
    /// be told from findings about the other.
    #[error("two parties are named {party:?} in {name}: give each party its own name")]
    PartyTwice {
        /// The name.
        party: String,
        /// The trust file.
        name: String,
    },
    /// One recorder pinned by two parties: its evidence (and anchors) could be claimed by
    /// either, and a finding about it could not be told apart.
    #[error(
        "recorder 0x{} is pinned by two parties, {first:?} and {second:?}, in {name}: a recorder belongs to one party",
        hex::encode(recorder)
    )]
    RecorderTwice {
        /// The recorder.
        recorder: [u8; 20],
        /// The first party pinning it.
        first: String,
        /// The second.
        second: String,
        /// The trust file.
        name: String,
    },
    /// The first file of `afr-verify case` without `--trust` is not a case file (a bundle, an
    /// export, or not text at all).
    #[error(
        "{name} is {what}, not a case file: give a case file first (afr-verify case CASE.toml [MORE.bundle ...]), or --trust TRUST.toml with the bundles (afr-verify case --trust TRUST.toml A.bundle B.bundle ...)"
    )]
    NotACaseFile {
        /// The file, as given.
        name: String,
        /// What it is instead: `a disclosure bundle`, `a whole-log export`, `not UTF-8 text`.
        what: &'static str,
    },
    /// A case that names no bundle at all.
    #[error(
        "the case names no bundle: list them under each party's `bundles`, or after the trust file"
    )]
    NoBundle,
    /// Two anchors files for one recorder: which one to trust is the user's choice to make.
    #[error(
        "two anchors files for recorder 0x{}: {} and {}",
        hex::encode(recorder),
        first.display(),
        second.display()
    )]
    AnchorsTwice {
        /// The recorder.
        recorder: RecorderId,
        /// The first file.
        first: PathBuf,
        /// The second.
        second: PathBuf,
    },
    /// `--recorder` names a recorder the trust file does not.
    #[error(
        "--recorder 0x{} is not among the trust file's recorders",
        hex::encode(recorder)
    )]
    RecorderNotTrusted {
        /// The recorder.
        recorder: RecorderId,
    },
}

/// An approver of a trust file, as errors name them: `approver "j.doe" of party "Acme"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApproverName {
    /// The approver's name.
    pub approver: String,
    /// Their party's name.
    pub party: String,
}

impl fmt::Display for ApproverName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "approver {:?} of party {:?}", self.approver, self.party)
    }
}

/// An answer that is not the JSON-RPC it should be.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Malformed {
    /// The response body is not JSON.
    #[error("{call}: response is not json")]
    NotJson {
        /// The call.
        call: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// A batch answered with one object (usually an error for the whole batch).
    #[error("rpc batch answered with a single object: {answer}")]
    NotABatch {
        /// The object's `error`, or the object, as JSON (URLs redacted).
        answer: String,
    },
    /// A batch answer whose id matches no call.
    #[error("rpc batch answer with an unknown id")]
    UnknownId,
    /// A batch answering one call twice.
    #[error("rpc batch answered call {id} twice")]
    AnsweredTwice {
        /// The call's id.
        id: usize,
    },
    /// A batch answer without a result for some call.
    #[error("rpc batch answer is missing a result")]
    MissingResult,
    /// A value that should be a `0x` hex quantity.
    #[error("{what} is not a hex quantity")]
    NotAQuantity {
        /// The field or call.
        what: &'static str,
        /// Why, when the digits did not parse.
        #[source]
        source: Option<ParseIntError>,
    },
    /// A result of the wrong JSON type.
    #[error("{what} is not a {expected}")]
    WrongType {
        /// The result, e.g. `eth_getLogs result`.
        what: &'static str,
        /// What it should be, e.g. `list`.
        expected: &'static str,
    },
}

/// An endpoint URL with its credentials removed ([`afr_core::redact_url`]): scheme, host and
/// port only. The only way to make one is [`RedactedUrl::new`], so an error holding one cannot
/// hold an API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedactedUrl(String);

impl RedactedUrl {
    /// Redacts `url`.
    pub fn new(url: &str) -> RedactedUrl {
        RedactedUrl(afr_core::redact_url(url))
    }

    /// The redacted URL.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RedactedUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly on purpose")]

    use super::*;
    use crate::{Kind, Source, Trust, anchors::Rpc, parse_addr};

    const A: &str = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266";
    const B: &str = "0x70997970c51812dc3a010c7d01b50e0d17dc79c8";

    fn party(name: &str, rec: &str) -> String {
        format!("[[party]]\nname = \"{name}\"\nrecorders = [\"{rec}\"]\n")
    }

    fn trust_err(
        file: Option<&str>,
        chain_id: Option<u64>,
        contract: Option<&str>,
        recorder: Option<&str>,
    ) -> VerifyError {
        Trust::new(file.map(|t| ("t.toml", t)), chain_id, contract, recorder).unwrap_err()
    }

    /// The error of a trust file `file` (`t.toml`) pinned alone.
    fn file_err(file: &str) -> VerifyError {
        trust_err(Some(file), None, None, None)
    }

    /// Every failure of a pin is [`VerifyError::Usage`], which `afr-verify` maps to exit 64:
    /// the exit code follows the variant, not the message.
    #[test]
    fn every_pin_failure_is_a_usage_error() {
        let acme = party("Acme", A);
        let cases: Vec<(VerifyError, &str)> = vec![
            (
                trust_err(None, None, None, Some("0xzz")),
                "--recorder must be 0x followed by 40 hex digits",
            ),
            (
                trust_err(None, None, Some("0x1234"), None),
                "--contract must be 0x followed by 40 hex digits",
            ),
            (
                parse_addr("nothex", "recorder").unwrap_err(),
                "recorder must be 0x followed by 40 hex digits",
            ),
            (file_err("chain_id = \"ten\""), "trust file t.toml"),
            (
                file_err("chain_id = 1\nrecorder = \"x\""),
                "trust file t.toml",
            ),
            (
                trust_err(
                    Some(&format!("chain_id = 10\n{acme}")),
                    Some(11),
                    None,
                    None,
                ),
                "--chain-id 11 differs from chain_id 10 in t.toml",
            ),
            (
                trust_err(
                    Some(&format!("contract = \"{A}\"\n{acme}")),
                    None,
                    Some(B),
                    None,
                ),
                "--contract differs from the contract in t.toml",
            ),
            (
                file_err("contract = \"0x12\"\n"),
                "contract in t.toml must be 0x followed by 40 hex digits",
            ),
            (
                file_err("chain_id = 10\n"),
                "trust file t.toml names no [[party]] with recorders",
            ),
            (
                file_err("[[party]]\nname = \"x\"\nrecorders = []"),
                "party \"x\" in t.toml has no recorders",
            ),
            (
                file_err("[[party]]\nname = \"x\"\nrecorders = [\"0xq\"]"),
                "recorder of party \"x\" must be 0x followed by 40 hex digits",
            ),
            (
                file_err(&format!("{acme}{}", party("Acme", B))),
                "two parties are named \"Acme\" in t.toml: give each party its own name",
            ),
            (
                trust_err(Some(&acme), None, None, Some(B)),
                "--recorder 0x70997970c51812dc3a010c7d01b50e0d17dc79c8 is not among the trust file's recorders",
            ),
            (
                file_err(&format!(
                    "{acme}[[party.approver]]\nname = \"j\"\nkeys = []\n"
                )),
                "approver \"j\" of party \"Acme\" in t.toml has no keys",
            ),
            (
                file_err(&format!(
                    "{acme}[[party.approver]]\nname = \"j\"\nkeys = [\"0x12\"]\n"
                )),
                "key \"0x12\" of approver \"j\" of party \"Acme\" in t.toml is neither an Ethereum address (0x and 40 hex digits) nor an OpenSSH public key",
            ),
            (
                file_err(&format!(
                    "{acme}[[party.approver]]\nname = \"j\"\nkeys = [\"{A}\"]\n{}[[party.approver]]\nname = \"k\"\nkeys = [\"{}\"]\n",
                    party("Globex", B),
                    A.to_ascii_uppercase().replace("0X", "0x")
                )),
                "key 0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266 is pinned for approver \"j\" of party \"Acme\" and again for approver \"k\" of party \"Globex\" in t.toml",
            ),
        ];
        let unpinned = Trust::new(None, None, None, Some(A)).unwrap();
        let urls = ["http://127.0.0.1:1/SECRET".to_owned()];
        let rpc = Source::Rpc {
            urls: &urls,
            agree: crate::Agree::All,
            block: None,
            from_block: 0,
        };
        let file = Source::File(std::path::Path::new("/nonexistent/anchors.json"));
        let cases = cases.into_iter().chain([
            (
                crate::verify(Kind::Log, b"", &unpinned, rpc).unwrap_err(),
                "--rpc needs a pinned chain: give --chain-id or a trust file with chain_id",
            ),
            (
                crate::verify(Kind::Bundle, b"", &unpinned, file).unwrap_err(),
                "--anchors needs a pinned chain: give --chain-id or a trust file with chain_id",
            ),
        ]);
        for (e, text) in cases {
            assert!(matches!(e, VerifyError::Usage(_)), "{e:?}");
            assert_eq!(e.to_string(), text, "{e:?}");
        }
    }

    /// Errors that are not about pins are not usage errors.
    #[test]
    fn io_and_rpc_failures_are_not_usage_errors() {
        let e =
            crate::anchors::Anchors::load(std::path::Path::new("/nonexistent/a.json")).unwrap_err();
        assert!(matches!(e, VerifyError::AnchorsRead { .. }), "{e:?}");
        assert_eq!(e.to_string(), "cannot read /nonexistent/a.json");
        let e = Rpc::new("http://user:pw@127.0.0.1:1/v2/SECRET?key=SECRET")
            .chain_id()
            .unwrap_err();
        let VerifyError::Transport { call, url, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(call, "rpc eth_chainId");
        assert_eq!(url.as_str(), "http://127.0.0.1:1/…");
        assert!(!format!("{e} {e:?}").contains("SECRET"), "{e:?}");
        assert!(!format!("{e} {e:?}").contains("pw"), "{e:?}");
    }

    /// Messages a caller shows keep their wording; the source chain adds the detail.
    #[test]
    fn messages_name_what_failed() {
        let e = VerifyError::ChainMismatch {
            served: 31337,
            pinned: 10,
        };
        assert_eq!(
            e.to_string(),
            "the endpoint serves chain 31337, not the pinned chain 10; nothing was checked"
        );
        let e = VerifyError::from(Malformed::NotAQuantity {
            what: "eth_chainId",
            source: "zz".parse::<u64>().err(),
        });
        assert_eq!(e.to_string(), "eth_chainId is not a hex quantity");
        assert!(std::error::Error::source(&e).is_some());
    }
}
