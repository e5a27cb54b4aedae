//! Where `AfrAnchor` lives: one well-known address on every EVM chain.
//!
//! The contract is deployed through the standard deterministic CREATE2 deployer (Arachnid's
//! proxy, the one Foundry and most tooling use) with a fixed, named salt. A CREATE2 address
//! depends only on the deployer, the salt and the init code, never on who sends the
//! transaction or on a nonce, so the same artifact lands at the same address on any chain:
//!
//! ```text
//!  calldata to the deployer = SALT[32] ‖ initcode        (initcode = the artifact's creation
//!                                                          bytecode; no constructor arguments)
//!  ANCHOR_ADDRESS = keccak256(0xff ‖ CREATE2_DEPLOYER[20] ‖ SALT[32] ‖ keccak256(initcode))[12..]
//! ```
//!
//! A verifier that knows this address does not have to trust an address given to it alongside
//! a bundle: code at [`ANCHOR_ADDRESS`] that equals the artifact's runtime code is the genuine
//! contract, on whichever chain it is found.
//!
//! The contract itself is here too, for whoever deploys it or checks it: the artifact `forge
//! build` produced ([`ARTIFACT`], with [`creation_code`] and [`runtime_code`]) and the topic of
//! its one event ([`ANCHORED_TOPIC`]). The anchorer deploys and calls that code; the verifier
//! compares what a chain holds with [`runtime_code`] and reads `Anchored` logs by their topic.
//! Neither keeps a copy of its own.
//!
//! This module holds constants and reads the built-in artifact (the crate is sans-I/O); the
//! anchorer crate recomputes [`ANCHOR_ADDRESS`] from the artifact in a test, and this module's
//! tests recompute [`ANCHORED_TOPIC`] from the artifact's ABI, so a change of the contract that
//! is not reflected here fails the build's tests.
//!
//! The deployer is present on anvil from genesis and on most public chains. Where it is not,
//! anyone can put it there with its pre-signed, chain-id-free deployment transaction (see
//! [`CREATE2_DEPLOYER_HOWTO`]): fund [`CREATE2_DEPLOYER_SIGNER`] with 0.01 ether and broadcast
//! that transaction. It lands at [`CREATE2_DEPLOYER`] on every chain that accepts
//! pre-EIP-155 transactions.

/// Arachnid's deterministic deployment proxy, lower-case hex. Its runtime code takes
/// `salt[32] ‖ initcode` as calldata, runs `CREATE2(0, initcode, salt)`, and returns the new
/// contract's 20-byte address (it reverts if the creation fails).
pub const CREATE2_DEPLOYER: &str = "0x4e59b44847b379578588920ca78fbf26c0b4956c";

/// The one-time signer of the deployer's pre-signed deployment transaction (nonce 0, gas
/// price 100 gwei, gas limit 100,000: it needs 0.01 ether).
pub const CREATE2_DEPLOYER_SIGNER: &str = "0x3fab184622dc19b6109349b94811493bf2a45362";

/// Where the deployer's pre-signed deployment transaction is published.
pub const CREATE2_DEPLOYER_HOWTO: &str =
    "https://github.com/Arachnid/deterministic-deployment-proxy";

/// Domain label of the salt.
pub const SALT_LABEL: &[u8] = b"afr/v1/anchor";

/// The CREATE2 salt: [`SALT_LABEL`] right-padded with zeros to 32 bytes
/// (`0x6166722f76312f616e63686f72` followed by 19 zero bytes; what
/// `cast format-bytes32-string "afr/v1/anchor"` prints).
pub const SALT: [u8; 32] = pad32(SALT_LABEL);

/// The canonical address of `AfrAnchor` (EIP-55 checksummed): [`CREATE2_DEPLOYER`], [`SALT`]
/// and the checked-in artifact's creation bytecode. It changes whenever the contract's
/// bytecode does (including its metadata hash), and so does the format version in the salt's
/// label when the contract's interface does.
pub const ANCHOR_ADDRESS: &str = "0x83e597148E8aa41947Ec4CEEf4Ed685Df69CeF3f";

/// The contract artifact of `AfrAnchor` (ABI, creation and runtime bytecode) as `forge build`
/// produced it. The file stays where `scripts/sync-artifact.sh` writes it and CI checks it is
/// current (`anchorer/artifacts/AfrAnchor.json`); this crate is its one reader in Rust.
pub const ARTIFACT: &str = include_str!("../../anchorer/artifacts/AfrAnchor.json");

/// The canonical signature of the contract's one event,
/// `Anchored(address indexed recorder, uint64 indexed epoch, bytes32 root, bytes32 backPointer)`.
pub const ANCHORED_EVENT: &str = "Anchored(address,uint64,bytes32,bytes32)";

/// `keccak256(ANCHORED_EVENT)`: topic 0 of every `Anchored` log, lower-case `0x` hex (as
/// JSON-RPC writes topics). Checked against the artifact's ABI in the tests.
pub const ANCHORED_TOPIC: &str =
    "0xd6f0f013808bc2f1d448753205790daee522b8c2904b0d109ec4099b097c8eae";

/// The built-in [`ARTIFACT`] lacks a bytecode field (a build error, never the evidence's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the built-in AfrAnchor artifact has no {field}")]
pub struct ArtifactError {
    /// The JSON field that is missing or not hex: `bytecode` or `deployedBytecode`.
    pub field: &'static str,
}

/// The parts of the artifact read here, borrowed from [`ARTIFACT`].
#[derive(serde::Deserialize)]
struct Artifact<'a> {
    #[serde(borrow)]
    bytecode: Code<'a>,
    #[serde(borrow, rename = "deployedBytecode")]
    deployed_bytecode: Code<'a>,
}

#[derive(serde::Deserialize)]
struct Code<'a> {
    object: &'a str,
}

/// The hex of one bytecode field of [`ARTIFACT`], without `0x`.
fn code(
    field: &'static str,
    pick: impl FnOnce(Artifact<'static>) -> &'static str,
) -> Result<&'static str, ArtifactError> {
    let a: Artifact<'static> =
        serde_json::from_str(ARTIFACT).map_err(|_| ArtifactError { field })?;
    let object = pick(a);
    let hex = object.strip_prefix("0x").unwrap_or(object);
    if hex.is_empty() || !hex.len().is_multiple_of(2) || !hex.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Err(ArtifactError { field });
    }
    Ok(hex)
}

/// The artifact's creation bytecode, hex without `0x`: the CREATE2 init code (the contract has
/// no constructor arguments).
pub fn creation_code() -> Result<&'static str, ArtifactError> {
    code("bytecode", |a| a.bytecode.object)
}

/// The artifact's runtime code, hex without `0x`: what a chain holds at a genuine `AfrAnchor`.
pub fn runtime_code() -> Result<&'static str, ArtifactError> {
    code("deployedBytecode", |a| a.deployed_bytecode.object)
}

/// `label` right-padded with zeros to 32 bytes. Evaluated at compile time ([`SALT`] is a
/// constant): a label over 32 bytes fails the build.
const fn pad32(label: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    let (head, _) = out.split_at_mut(label.len());
    head.copy_from_slice(label);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salt_is_the_label_right_padded() {
        assert_eq!(&SALT[..SALT_LABEL.len()], SALT_LABEL);
        assert!(SALT[SALT_LABEL.len()..].iter().all(|b| *b == 0));
        assert_eq!(
            hex::encode(SALT),
            "6166722f76312f616e63686f7200000000000000000000000000000000000000"
        );
    }

    #[test]
    fn anchored_topic_is_the_artifacts_event() {
        let v: serde_json::Value = serde_json::from_str(ARTIFACT).unwrap();
        let events: Vec<String> = v["abi"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["type"] == "event")
            .map(|i| {
                let types: Vec<&str> = i["inputs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a["type"].as_str().unwrap())
                    .collect();
                format!("{}({})", i["name"].as_str().unwrap(), types.join(","))
            })
            .collect();
        assert_eq!(events, [ANCHORED_EVENT]);
        let topic = crate::eip712::keccak256(ANCHORED_EVENT.as_bytes());
        assert_eq!(format!("0x{}", hex::encode(topic)), ANCHORED_TOPIC);
    }

    #[test]
    fn the_artifacts_code_is_hex() {
        for code in [creation_code().unwrap(), runtime_code().unwrap()] {
            assert!(hex::decode(code).is_ok_and(|b| b.len() > 100));
        }
        assert_ne!(creation_code(), runtime_code());
    }
}
