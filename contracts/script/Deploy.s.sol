// SPDX-License-Identifier: MIT OR Apache-2.0
pragma solidity 0.8.29;

import {AfrAnchor} from "../src/AfrAnchor.sol";
import {Vm} from "../test/utils/Vm.sol";

/// @notice Deploys AfrAnchor. It has no constructor arguments, owner or configuration.
/// @dev forge script contracts/script/Deploy.s.sol --rpc-url $RPC --private-key $KEY --broadcast
contract Deploy {
    Vm internal constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    /// @notice Marks this contract as a forge script.
    bool public constant IS_SCRIPT = true;

    /// @notice Broadcasts the deployment from the key given on the command line.
    /// @return anchor The deployed contract.
    function run() external returns (AfrAnchor anchor) {
        vm.startBroadcast();
        anchor = new AfrAnchor();
        vm.stopBroadcast();
    }
}
