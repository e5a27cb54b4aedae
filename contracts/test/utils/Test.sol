// SPDX-License-Identifier: MIT OR Apache-2.0
pragma solidity 0.8.29;

import {Vm} from "./Vm.sol";

/// @notice Minimal base for forge tests: the cheatcode handle, `bound`, and invariant targets.
/// @dev Replaces the parts of forge-std's Test that the AFR tests use.
abstract contract Test {
    /// @dev The cheatcode address, keccak256("hevm cheat code")[12:].
    Vm internal constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    /// @notice Marks this contract as a test contract for forge.
    bool public constant IS_TEST = true;

    address[] private _targetContracts;

    /// @notice The contracts that invariant runs call (read by forge).
    /// @return The contracts registered with `targetContract`.
    function targetContracts() public view returns (address[] memory) {
        return _targetContracts;
    }

    /// @dev Restricts invariant runs to calling `target` (and others registered the same way).
    function targetContract(address target) internal {
        _targetContracts.push(target);
    }

    /// @dev Maps `x` uniformly enough into [lo, hi] (inclusive), keeping small values as they
    /// are so that fuzzer edge cases (0, 1, ...) survive; requires lo <= hi.
    function bound(uint256 x, uint256 lo, uint256 hi) internal pure returns (uint256) {
        vm.assertTrue(lo <= hi, "bound: lo > hi");
        if (x >= lo && x <= hi) return x;
        uint256 span = hi - lo;
        if (span == type(uint256).max) return x;
        return lo + x % (span + 1);
    }
}
