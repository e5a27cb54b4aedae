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
//! This module holds constants only (the crate is sans-I/O and links no Keccak); the anchorer
//! crate recomputes [`ANCHOR_ADDRESS`] from the artifact in a test, so a change of the contract
//! that is not reflected here fails the build's tests.
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

const fn pad32(label: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut i = 0;
    while i < label.len() {
        out[i] = label[i];
        i += 1;
    }
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
}
