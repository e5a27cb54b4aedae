//! The `AfrAnchor` contract as Rust sees it: its calls, its event and every custom error,
//! checked against the artifact `forge build` wrote (a test compares each selector).

use afr_core::Hash32;
use alloy::{primitives::Bytes, sol, sol_types::SolInterface};

sol! {
    /// The anchor contract's interface (selectors checked against the artifact by a test).
    #[sol(rpc)]
    interface IAfrAnchor {
        function anchor(uint64 epoch, bytes32 root, bytes32 prevBackPointer) external;
        function anchorBatch(uint64 firstEpoch, bytes32[] calldata roots, bytes32 prevBackPointer) external;
        function rootOf(address recorder, uint64 epoch) external view returns (bytes32);
        function head(address recorder) external view returns (bool any, uint64 epoch);
        event Anchored(address indexed recorder, uint64 indexed epoch, bytes32 root, bytes32 backPointer);
        error ZeroRoot(uint64 epoch);
        error AlreadyAnchored(uint64 epoch, bytes32 root);
        error ConflictingRoot(uint64 epoch, bytes32 anchored, bytes32 proposed);
        error NotNextEpoch(uint64 epoch);
        error BadBackPointer(uint64 epoch, bytes32 expected, bytes32 given);
        error EmptyBatch();
    }
}

sol! {
    /// The OP-stack GasPriceOracle predeploy (at [`GAS_PRICE_ORACLE`]).
    interface IGasPriceOracle {
        function getL1Fee(bytes memory data) external view returns (uint256);
    }
}

/// Address of the OP-stack GasPriceOracle predeploy.
pub const GAS_PRICE_ORACLE: &str = "0x420000000000000000000000000000000000000F";

/// A custom error of `AfrAnchor`, decoded from revert data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContractRevert {
    /// `ZeroRoot(epoch)`.
    ZeroRoot {
        /// Epoch.
        epoch: u64,
    },
    /// `AlreadyAnchored(epoch, root)`: the epoch holds `root` already.
    AlreadyAnchored {
        /// Epoch.
        epoch: u64,
        /// The stored root.
        root: Hash32,
    },
    /// `ConflictingRoot(epoch, anchored, proposed)`.
    ConflictingRoot {
        /// Epoch.
        epoch: u64,
        /// The stored root.
        anchored: Hash32,
        /// The root sent.
        proposed: Hash32,
    },
    /// `NotNextEpoch(epoch)`.
    NotNextEpoch {
        /// Epoch.
        epoch: u64,
    },
    /// `BadBackPointer(epoch, expected, given)`.
    BadBackPointer {
        /// Epoch.
        epoch: u64,
        /// What the contract computed.
        expected: Hash32,
        /// What was sent.
        given: Hash32,
    },
    /// `EmptyBatch()`.
    EmptyBatch,
    /// Revert data that is none of the above (shown as hex).
    Unknown(Bytes),
}

impl ContractRevert {
    /// Decodes revert data.
    pub fn decode(data: &[u8]) -> ContractRevert {
        use IAfrAnchor::IAfrAnchorErrors as E;
        match E::abi_decode(data) {
            Ok(E::ZeroRoot(e)) => ContractRevert::ZeroRoot { epoch: e.epoch },
            Ok(E::AlreadyAnchored(e)) => ContractRevert::AlreadyAnchored {
                epoch: e.epoch,
                root: Hash32(e.root.0),
            },
            Ok(E::ConflictingRoot(e)) => ContractRevert::ConflictingRoot {
                epoch: e.epoch,
                anchored: Hash32(e.anchored.0),
                proposed: Hash32(e.proposed.0),
            },
            Ok(E::NotNextEpoch(e)) => ContractRevert::NotNextEpoch { epoch: e.epoch },
            Ok(E::BadBackPointer(e)) => ContractRevert::BadBackPointer {
                epoch: e.epoch,
                expected: Hash32(e.expected.0),
                given: Hash32(e.given.0),
            },
            Ok(E::EmptyBatch(_)) => ContractRevert::EmptyBatch,
            Err(_) => ContractRevert::Unknown(Bytes::copy_from_slice(data)),
        }
    }
}

impl std::fmt::Display for ContractRevert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ContractRevert::ZeroRoot { epoch } => {
                write!(f, "ZeroRoot: epoch {epoch} has a zero root")
            }
            ContractRevert::AlreadyAnchored { epoch, root } => {
                write!(f, "AlreadyAnchored: epoch {epoch} is anchored as 0x{root}")
            }
            ContractRevert::ConflictingRoot {
                epoch,
                anchored,
                proposed,
            } => write!(
                f,
                "ConflictingRoot: epoch {epoch} is anchored as 0x{anchored}, not 0x{proposed}"
            ),
            ContractRevert::NotNextEpoch { epoch } => {
                write!(
                    f,
                    "NotNextEpoch: epoch {epoch} is not the recorder's next epoch"
                )
            }
            ContractRevert::BadBackPointer {
                epoch,
                expected,
                given,
            } => write!(
                f,
                "BadBackPointer: epoch {epoch} expects back-pointer 0x{expected}, got 0x{given}"
            ),
            ContractRevert::EmptyBatch => f.write_str("EmptyBatch: no roots in the batch"),
            ContractRevert::Unknown(d) => write!(f, "unknown revert data {d}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::{
        primitives::{FixedBytes, keccak256},
        sol_types::{SolCall, SolError},
    };

    /// Every error of the artifact's ABI, by its signature, has the selector our interface
    /// gives it, and decodes to its own variant with its fields.
    #[test]
    fn every_contract_error_of_the_artifact_decodes() {
        let mut sigs = afr_testkit::abi_signatures(afr_core::deployment::ARTIFACT, "error");
        sigs.sort();
        let (a, b) = (FixedBytes([0xaa; 32]), FixedBytes([0xbb; 32]));
        let (ha, hb) = (Hash32([0xaa; 32]), Hash32([0xbb; 32]));
        use IAfrAnchor as I;
        // An error of the interface: its signature, its selector, an encoding, and what that
        // encoding decodes to.
        fn case<E: SolError>(
            e: E,
            want: ContractRevert,
        ) -> (&'static str, [u8; 4], Vec<u8>, ContractRevert) {
            (E::SIGNATURE, E::SELECTOR, e.abi_encode(), want)
        }
        let mut ours = vec![
            case(
                I::ZeroRoot { epoch: 3 },
                ContractRevert::ZeroRoot { epoch: 3 },
            ),
            case(
                I::AlreadyAnchored { epoch: 4, root: a },
                ContractRevert::AlreadyAnchored { epoch: 4, root: ha },
            ),
            case(
                I::ConflictingRoot {
                    epoch: 5,
                    anchored: a,
                    proposed: b,
                },
                ContractRevert::ConflictingRoot {
                    epoch: 5,
                    anchored: ha,
                    proposed: hb,
                },
            ),
            case(
                I::NotNextEpoch { epoch: 6 },
                ContractRevert::NotNextEpoch { epoch: 6 },
            ),
            case(
                I::BadBackPointer {
                    epoch: 7,
                    expected: a,
                    given: b,
                },
                ContractRevert::BadBackPointer {
                    epoch: 7,
                    expected: ha,
                    given: hb,
                },
            ),
            case(I::EmptyBatch {}, ContractRevert::EmptyBatch),
        ];
        ours.sort_by_key(|o| o.0);
        assert_eq!(
            ours.iter().map(|o| o.0.to_owned()).collect::<Vec<_>>(),
            sigs,
            "the interface declares exactly the artifact's errors"
        );
        for (sig, sel, data, want) in ours {
            assert_eq!(&keccak256(sig)[..4], &sel[..], "{sig}");
            assert_eq!(&data[..4], &sel[..], "{sig}");
            assert_eq!(ContractRevert::decode(&data), want, "{sig}");
        }
        // The selector the issue saw raw: AlreadyAnchored.
        assert_eq!(hex::encode(I::AlreadyAnchored::SELECTOR), "41a79553");
        let junk = [0xde, 0xad, 0xbe, 0xef];
        assert_eq!(
            ContractRevert::decode(&junk),
            ContractRevert::Unknown(Bytes::copy_from_slice(&junk))
        );
        // Truncated data of a known selector is not taken for that error.
        let short = I::AlreadyAnchored { epoch: 4, root: a }.abi_encode();
        assert!(matches!(
            ContractRevert::decode(&short[..36]),
            ContractRevert::Unknown(_)
        ));
    }

    #[test]
    fn interface_selectors_match_the_artifact() {
        let v: serde_json::Value = serde_json::from_str(afr_core::deployment::ARTIFACT).unwrap();
        let ids = &v["methodIdentifiers"];
        for (sig, sel) in [
            (
                "anchor(uint64,bytes32,bytes32)",
                IAfrAnchor::anchorCall::SELECTOR,
            ),
            (
                "anchorBatch(uint64,bytes32[],bytes32)",
                IAfrAnchor::anchorBatchCall::SELECTOR,
            ),
            ("rootOf(address,uint64)", IAfrAnchor::rootOfCall::SELECTOR),
            ("head(address)", IAfrAnchor::headCall::SELECTOR),
        ] {
            assert_eq!(ids[sig].as_str().unwrap(), hex::encode(sel), "{sig}");
        }
        assert_eq!(
            hex::encode(IGasPriceOracle::getL1FeeCall::SELECTOR),
            "49948e0e"
        );
    }

    /// The interface's event is the one whose topic the verifier reads (core's).
    #[test]
    fn anchored_event_is_cores() {
        use alloy::sol_types::SolEvent;
        assert_eq!(
            IAfrAnchor::Anchored::SIGNATURE,
            afr_core::deployment::ANCHORED_EVENT
        );
        assert_eq!(
            format!("{:#x}", IAfrAnchor::Anchored::SIGNATURE_HASH),
            afr_core::deployment::ANCHORED_TOPIC
        );
    }
}
