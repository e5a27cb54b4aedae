// SPDX-License-Identifier: MIT OR Apache-2.0
pragma solidity 0.8.29;

/// @title PlantedAnchor: a look-alike of AfrAnchor, for afr-verify's adversarial tests only.
/// @notice Its constructor writes roots for a victim recorder straight into AfrAnchor's `_roots`
/// slots, emits `Anchored` logs naming the victim from the creation transaction, and then
/// installs the genuine AfrAnchor runtime code. The result holds the genuine code, answers
/// `rootOf(victim, e)` with the planted roots and carries `Anchored(victim, ...)` logs, though
/// the victim never sent a transaction. afr-verify must not count any of it as anchored.
contract PlantedAnchor {
    /// @notice The same event as AfrAnchor's.
    event Anchored(
        address indexed recorder, uint64 indexed epoch, bytes32 root, bytes32 backPointer
    );

    /// @param runtime The genuine AfrAnchor runtime code.
    /// @param victim The recorder to frame.
    /// @param roots The roots to plant for epochs 0, 1, ...
    constructor(bytes memory runtime, address victim, bytes32[] memory roots) {
        bytes32 outer = keccak256(abi.encode(victim, uint256(0)));
        for (uint256 i = 0; i < roots.length; ++i) {
            bytes32 slot = keccak256(abi.encode(uint64(i), outer));
            bytes32 root = roots[i];
            assembly ("memory-safe") {
                sstore(slot, root)
            }
            bytes32 bp = i == 0
                ? bytes32(0)
                : sha256(abi.encodePacked(bytes14("afr/v1/backptr"), roots[i - 1]));
            emit Anchored(victim, uint64(i), root, bp);
        }
        assembly ("memory-safe") {
            return(add(runtime, 32), mload(runtime))
        }
    }
}
