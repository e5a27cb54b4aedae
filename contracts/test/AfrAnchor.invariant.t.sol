// SPDX-License-Identifier: MIT OR Apache-2.0
pragma solidity 0.8.29;

import {AfrAnchor} from "../src/AfrAnchor.sol";
import {Test} from "./utils/Test.sol";
import {Vm} from "./utils/Vm.sol";

/// @notice Drives AfrAnchor for a few recorders with valid anchors and with every kind of
/// invalid one, and keeps a ghost copy of what must be stored.
contract AnchorHandler is Test {
    AfrAnchor public immutable anchor;
    address[3] public recorders = [address(0x1001), address(0x1002), address(0x1003)];

    /// @dev Ghost state per recorder: number of anchored epochs, their roots, and the
    /// back-pointer each Anchored event carried.
    mapping(address => uint64) public count;
    mapping(address => mapping(uint64 => bytes32)) public ghostRoot;
    mapping(address => mapping(uint64 => bytes32)) public emittedBackPointer;

    /// @dev Set when the contract accepted something it must refuse or refused something valid,
    /// or when head moved by anything but the number of epochs anchored.
    string public violation;
    uint256 public anchored;

    constructor(AfrAnchor anchor_) {
        anchor = anchor_;
    }

    function _recorder(uint256 seed) internal view returns (address) {
        return recorders[seed % recorders.length];
    }

    function _bp(bytes32 prevRoot) internal pure returns (bytes32) {
        return sha256(bytes.concat("afr/v1/backptr", prevRoot));
    }

    function _nextBackPointer(address r) internal view returns (bytes32) {
        uint64 n = count[r];
        return n == 0 ? bytes32(0) : _bp(ghostRoot[r][n - 1]);
    }

    function _headOf(address r) internal view returns (uint256) {
        (bool any, uint64 epoch) = anchor.head(r);
        return any ? uint256(epoch) + 1 : 0; // number of anchored epochs
    }

    function _expectError(bytes memory err, bytes4 selector, string memory what) internal {
        if (err.length < 4 || bytes4(err) != selector) violation = what;
    }

    function _record(address r, uint256 before, uint256 n) internal {
        Vm.Log[] memory logs = vm.getRecordedLogs();
        if (logs.length != n) violation = "one Anchored event per epoch";
        for (uint256 i = 0; i < logs.length; ++i) {
            uint64 epoch = uint64(uint256(logs[i].topics[2]));
            (bytes32 root, bytes32 bp) = abi.decode(logs[i].data, (bytes32, bytes32));
            if (address(uint160(uint256(logs[i].topics[1]))) != r) violation = "event recorder";
            if (root != ghostRoot[r][epoch]) violation = "event root";
            emittedBackPointer[r][epoch] = bp;
        }
        if (_headOf(r) != before + n) violation = "head advanced by the number of epochs";
        anchored += n;
    }

    /// @notice A valid anchor of the recorder's next epoch.
    function anchorNext(uint256 who, bytes32 root) external {
        address r = _recorder(who);
        if (root == 0) root = bytes32(uint256(1));
        uint64 epoch = count[r];
        bytes32 bp = _nextBackPointer(r);
        uint256 before = _headOf(r);
        ghostRoot[r][epoch] = root;
        vm.recordLogs();
        vm.prank(r);
        try anchor.anchor(epoch, root, bp) {
            count[r] = epoch + 1;
            _record(r, before, 1);
        } catch {
            violation = "valid anchor refused";
        }
    }

    /// @notice A valid batch of 1..5 next epochs.
    function anchorBatchNext(uint256 who, uint256 seed, uint256 n) external {
        address r = _recorder(who);
        n = bound(n, 1, 5);
        uint64 first = count[r];
        bytes32[] memory roots = new bytes32[](n);
        for (uint256 i = 0; i < n; ++i) {
            roots[i] = keccak256(abi.encode(seed, i));
            ghostRoot[r][first + uint64(i)] = roots[i];
        }
        bytes32 bp = _nextBackPointer(r);
        uint256 before = _headOf(r);
        vm.recordLogs();
        vm.prank(r);
        try anchor.anchorBatch(first, roots, bp) {
            count[r] = first + uint64(n);
            _record(r, before, n);
        } catch {
            violation = "valid batch refused";
        }
    }

    /// @notice Re-anchoring an anchored epoch, with its own or another root: always refused.
    function reanchor(uint256 who, uint256 epochSeed, bytes32 root) external {
        address r = _recorder(who);
        if (count[r] == 0) return;
        uint64 epoch = uint64(bound(epochSeed, 0, count[r] - 1));
        if (root == 0) root = ghostRoot[r][epoch];
        bytes32 bp = epoch == 0 ? bytes32(0) : _bp(ghostRoot[r][epoch - 1]);
        vm.prank(r);
        try anchor.anchor(epoch, root, bp) {
            violation = "re-anchor accepted";
        } catch (bytes memory err) {
            _expectError(
                err,
                root == ghostRoot[r][epoch]
                    ? AfrAnchor.AlreadyAnchored.selector
                    : AfrAnchor.ConflictingRoot.selector,
                "re-anchor error"
            );
        }
    }

    /// @notice Skipping ahead: always refused.
    function anchorGap(uint256 who, uint256 skip, bytes32 root) external {
        address r = _recorder(who);
        if (root == 0) root = bytes32(uint256(1));
        uint64 epoch = count[r] + uint64(bound(skip, 1, 1000));
        bytes32 bp = _bp(root); // whatever: the gap is found first
        vm.prank(r);
        try anchor.anchor(epoch, root, bp) {
            violation = "gap accepted";
        } catch (bytes memory err) {
            _expectError(err, AfrAnchor.NotNextEpoch.selector, "gap error");
        }
    }

    /// @notice The next epoch with a wrong back-pointer: always refused.
    function anchorBadBackPointer(uint256 who, bytes32 root, bytes32 bp) external {
        address r = _recorder(who);
        if (root == 0) root = bytes32(uint256(1));
        if (bp == _nextBackPointer(r)) bp = ~bp;
        vm.prank(r);
        try anchor.anchor(count[r], root, bp) {
            violation = "bad back-pointer accepted";
        } catch (bytes memory err) {
            _expectError(err, AfrAnchor.BadBackPointer.selector, "back-pointer error");
        }
    }
}

/// @notice Invariants of AfrAnchor under the handler's random calls.
contract AfrAnchorInvariantTest is Test {
    AfrAnchor internal anchor;
    AnchorHandler internal handler;

    function setUp() public {
        anchor = new AfrAnchor();
        handler = new AnchorHandler(anchor);
        targetContract(address(handler));
    }

    /// @dev Nothing valid was refused, nothing invalid accepted, head moved one epoch at a time.
    function invariant_handlerSawNoViolation() public view {
        vm.assertEq(bytes(handler.violation()).length, 0, handler.violation());
    }

    /// @dev Anchored roots never change, and nothing beyond head is stored.
    function invariant_anchoredRootsNeverChange() public view {
        for (uint256 i = 0; i < 3; ++i) {
            address r = handler.recorders(i);
            uint64 n = handler.count(r);
            for (uint64 e = 0; e < n; ++e) {
                vm.assertEq(anchor.rootOf(r, e), handler.ghostRoot(r, e), "anchored root");
            }
            vm.assertEq(anchor.rootOf(r, n), bytes32(0), "root past head");
            (bool any, uint64 head) = anchor.head(r);
            vm.assertEq(any, n > 0, "head.any");
            vm.assertEq(head, n == 0 ? 0 : n - 1, "head.epoch");
        }
    }

    /// @dev Every anchored epoch's back-pointer links it to the root before it.
    function invariant_backPointersLink() public view {
        for (uint256 i = 0; i < 3; ++i) {
            address r = handler.recorders(i);
            uint64 n = handler.count(r);
            for (uint64 e = 0; e < n; ++e) {
                bytes32 want = e == 0
                    ? bytes32(0)
                    : sha256(bytes.concat("afr/v1/backptr", anchor.rootOf(r, e - 1)));
                vm.assertEq(handler.emittedBackPointer(r, e), want, "back-pointer");
            }
        }
    }
}
