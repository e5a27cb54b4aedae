// Hardhat Network as a plain JSON-RPC node for verifier/tests/it/hardhat.rs: chain 31337,
// one block per transaction, no compilation (the AfrAnchor artifact is deployed by cast).
module.exports = { networks: { hardhat: { chainId: 31337 } } };
