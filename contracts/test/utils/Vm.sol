// SPDX-License-Identifier: MIT OR Apache-2.0
pragma solidity 0.8.29;

/// @notice The few Foundry cheatcodes that the AFR tests and scripts use.
/// @dev forge-std is not vendored (no registry ships it), so this declares just what we call.
/// Signatures must match Foundry's exactly: forge dispatches on the selector.
interface Vm {
    /// @notice A log captured by `recordLogs`.
    struct Log {
        bytes32[] topics;
        bytes data;
        address emitter;
    }

    // Pranks and expectations.
    function prank(address sender) external;
    function startPrank(address sender) external;
    function stopPrank() external;
    function expectRevert(bytes4 revertData) external;
    function expectRevert(bytes calldata revertData) external;
    function expectEmit(address emitter) external;
    function assume(bool condition) external pure;
    function label(address account, string calldata newLabel) external;
    function deal(address account, uint256 newBalance) external;
    function recordLogs() external;
    function getRecordedLogs() external returns (Log[] memory logs);

    // Assertions (they revert, which fails the test).
    function assertTrue(bool condition, string calldata error) external pure;
    function assertFalse(bool condition, string calldata error) external pure;
    function assertEq(bool left, bool right, string calldata error) external pure;
    function assertEq(uint256 left, uint256 right, string calldata error) external pure;
    function assertEq(bytes32 left, bytes32 right, string calldata error) external pure;
    function assertEq(address left, address right, string calldata error) external pure;

    // Files and JSON.
    function projectRoot() external view returns (string memory path);
    function readFile(string calldata path) external view returns (string memory data);
    function parseJson(string calldata json, string calldata key)
        external
        pure
        returns (bytes memory abiEncodedData);
    function toString(uint256 value) external pure returns (string memory);

    // Scripts.
    function startBroadcast() external;
    function stopBroadcast() external;
}
