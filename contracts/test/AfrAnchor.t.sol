// SPDX-License-Identifier: MIT OR Apache-2.0
pragma solidity 0.8.29;

import {AfrAnchor} from "../src/AfrAnchor.sol";
import {Test} from "./utils/Test.sol";

/// @notice Unit and fuzz tests of anchoring: every rule, every error, events, head and rootOf.
contract AfrAnchorTest is Test {
    event Anchored(
        address indexed recorder, uint64 indexed epoch, bytes32 root, bytes32 backPointer
    );

    AfrAnchor internal anchor;
    address internal constant ALICE = address(0xA11CE);
    address internal constant BOB = address(0xB0B);

    function setUp() public {
        anchor = new AfrAnchor();
    }

    // ---- helpers ----

    /// @dev A nonzero pseudo-random root for epoch `e` of stream `seed`.
    function _root(uint256 seed, uint256 e) internal pure returns (bytes32) {
        return keccak256(abi.encode("afr-test-root", seed, e));
    }

    /// @dev The back-pointer by the spec formula, independent of the contract.
    function _bp(bytes32 prevRoot) internal pure returns (bytes32) {
        return sha256(bytes.concat("afr/v1/backptr", prevRoot));
    }

    /// @dev Anchors epochs 0..n-1 of stream `seed` for `who`, one transaction each.
    function _anchorChain(address who, uint256 seed, uint256 n) internal {
        bytes32 bp;
        for (uint256 e = 0; e < n; ++e) {
            vm.prank(who);
            anchor.anchor(uint64(e), _root(seed, e), bp);
            bp = _bp(_root(seed, e));
        }
    }

    function _assertHead(address who, bool any, uint64 epoch) internal view {
        (bool gotAny, uint64 gotEpoch) = anchor.head(who);
        vm.assertEq(gotAny, any, "head.any");
        vm.assertEq(gotEpoch, epoch, "head.epoch");
    }

    // ---- anchor: happy paths ----

    function test_anchor_epochZero() public {
        bytes32 r = _root(1, 0);
        vm.expectEmit(address(anchor));
        emit Anchored(ALICE, 0, r, bytes32(0));
        vm.prank(ALICE);
        anchor.anchor(0, r, bytes32(0));
        vm.assertEq(anchor.rootOf(ALICE, 0), r, "rootOf(0)");
        vm.assertEq(anchor.rootOf(ALICE, 1), bytes32(0), "rootOf(1)");
        _assertHead(ALICE, true, 0);
    }

    function test_anchor_steadyState() public {
        _anchorChain(ALICE, 1, 3);
        bytes32 r = _root(1, 3);
        bytes32 bp = _bp(_root(1, 2));
        vm.expectEmit(address(anchor));
        emit Anchored(ALICE, 3, r, bp);
        vm.prank(ALICE);
        anchor.anchor(3, r, bp);
        vm.assertEq(anchor.rootOf(ALICE, 3), r, "rootOf(3)");
        _assertHead(ALICE, true, 3);
    }

    function test_anchor_recordersAreIndependent() public {
        _anchorChain(ALICE, 1, 3);
        _assertHead(BOB, false, 0);
        _anchorChain(BOB, 2, 1); // Bob starts at epoch 0 too, whatever Alice did
        _assertHead(ALICE, true, 2);
        _assertHead(BOB, true, 0);
        vm.assertEq(anchor.rootOf(BOB, 0), _root(2, 0), "bob rootOf(0)");
        vm.assertEq(anchor.rootOf(ALICE, 0), _root(1, 0), "alice rootOf(0)");
    }

    // ---- anchor: every error ----

    function test_anchor_revertsOnZeroRoot() public {
        vm.prank(ALICE);
        vm.expectRevert(abi.encodeWithSelector(AfrAnchor.ZeroRoot.selector, uint64(0)));
        anchor.anchor(0, bytes32(0), bytes32(0));

        _anchorChain(ALICE, 1, 1);
        bytes32 bp = _bp(_root(1, 0)); // before prank: sha256 is a (precompile) call
        vm.prank(ALICE);
        vm.expectRevert(abi.encodeWithSelector(AfrAnchor.ZeroRoot.selector, uint64(1)));
        anchor.anchor(1, bytes32(0), bp);
    }

    function test_anchor_revertsWhenFirstEpochIsNotZero() public {
        bytes32 bp = _bp(_root(1, 0));
        vm.prank(ALICE);
        vm.expectRevert(abi.encodeWithSelector(AfrAnchor.NotNextEpoch.selector, uint64(1)));
        anchor.anchor(1, _root(1, 1), bp);
        _assertHead(ALICE, false, 0);
    }

    function test_anchor_revertsOnGap() public {
        _anchorChain(ALICE, 1, 2);
        bytes32 bp = _bp(_root(1, 2));
        vm.prank(ALICE);
        vm.expectRevert(abi.encodeWithSelector(AfrAnchor.NotNextEpoch.selector, uint64(3)));
        anchor.anchor(3, _root(1, 3), bp);
    }

    function test_anchor_revertsOnNonzeroBackPointerAtEpochZero() public {
        bytes32 bogus = bytes32(uint256(1));
        vm.prank(ALICE);
        vm.expectRevert(
            abi.encodeWithSelector(AfrAnchor.BadBackPointer.selector, uint64(0), bytes32(0), bogus)
        );
        anchor.anchor(0, _root(1, 0), bogus);
    }

    function test_anchor_revertsOnWrongBackPointer() public {
        _anchorChain(ALICE, 1, 1);
        bytes32 expected = _bp(_root(1, 0));
        // The root itself instead of its back-pointer, a common anchorer bug.
        bytes32 given = _root(1, 0);
        vm.prank(ALICE);
        vm.expectRevert(
            abi.encodeWithSelector(AfrAnchor.BadBackPointer.selector, uint64(1), expected, given)
        );
        anchor.anchor(1, _root(1, 1), given);
    }

    function test_anchor_revertsOnRetryWithSameRoot() public {
        _anchorChain(ALICE, 1, 2);
        vm.prank(ALICE);
        vm.expectRevert(
            abi.encodeWithSelector(AfrAnchor.AlreadyAnchored.selector, uint64(0), _root(1, 0))
        );
        anchor.anchor(0, _root(1, 0), bytes32(0));

        bytes32 bp = _bp(_root(1, 0));
        vm.prank(ALICE);
        vm.expectRevert(
            abi.encodeWithSelector(AfrAnchor.AlreadyAnchored.selector, uint64(1), _root(1, 1))
        );
        anchor.anchor(1, _root(1, 1), bp);
    }

    function test_anchor_revertsOnConflictingRoot() public {
        _anchorChain(ALICE, 1, 2);
        bytes32 fork = _root(666, 1);
        bytes32 bp = _bp(_root(1, 0));
        vm.prank(ALICE);
        vm.expectRevert(
            abi.encodeWithSelector(AfrAnchor.ConflictingRoot.selector, uint64(1), _root(1, 1), fork)
        );
        anchor.anchor(1, fork, bp);
        vm.assertEq(anchor.rootOf(ALICE, 1), _root(1, 1), "first root stays");
    }

    function test_anchor_holdsNoEther() public {
        vm.deal(ALICE, 1 ether);
        vm.prank(ALICE);
        (bool sent,) = address(anchor).call{value: 1}("");
        vm.assertFalse(sent, "plain transfer accepted");
        vm.prank(ALICE);
        (sent,) = address(anchor).call{value: 1}(
            abi.encodeCall(AfrAnchor.anchor, (0, _root(1, 0), bytes32(0)))
        );
        vm.assertFalse(sent, "payable anchor");
        vm.assertEq(address(anchor).balance, 0, "balance");
    }

    // ---- anchorBatch ----

    function _batchRoots(uint256 seed, uint256 first, uint256 n)
        internal
        pure
        returns (bytes32[] memory roots)
    {
        roots = new bytes32[](n);
        for (uint256 i = 0; i < n; ++i) {
            roots[i] = _root(seed, first + i);
        }
    }

    function test_anchorBatch_fromEpochZero() public {
        bytes32[] memory roots = _batchRoots(1, 0, 4);
        bytes32 bp;
        for (uint256 i = 0; i < roots.length; ++i) {
            vm.expectEmit(address(anchor));
            emit Anchored(ALICE, uint64(i), roots[i], bp);
            bp = _bp(roots[i]);
        }
        vm.prank(ALICE);
        anchor.anchorBatch(0, roots, bytes32(0));
        for (uint256 i = 0; i < roots.length; ++i) {
            vm.assertEq(anchor.rootOf(ALICE, uint64(i)), roots[i], "rootOf");
        }
        _assertHead(ALICE, true, 3);
    }

    function test_anchorBatch_ten() public {
        _anchorChain(ALICE, 1, 1);
        bytes32[] memory roots = _batchRoots(1, 1, 10);
        bytes32 bp = _bp(_root(1, 0));
        vm.prank(ALICE);
        anchor.anchorBatch(1, roots, bp);
        _assertHead(ALICE, true, 10);
    }

    function test_anchorBatch_revertsWhenEmpty() public {
        vm.prank(ALICE);
        vm.expectRevert(AfrAnchor.EmptyBatch.selector);
        anchor.anchorBatch(0, new bytes32[](0), bytes32(0));
    }

    function test_anchorBatch_isAllOrNothing() public {
        bytes32[] memory roots = _batchRoots(1, 0, 5);
        roots[3] = bytes32(0);
        vm.prank(ALICE);
        vm.expectRevert(abi.encodeWithSelector(AfrAnchor.ZeroRoot.selector, uint64(3)));
        anchor.anchorBatch(0, roots, bytes32(0));
        _assertHead(ALICE, false, 0);
        vm.assertEq(anchor.rootOf(ALICE, 0), bytes32(0), "nothing stored");
    }

    function test_anchorBatch_revertsOnGap() public {
        _anchorChain(ALICE, 1, 1);
        bytes32[] memory roots = _batchRoots(1, 2, 2);
        bytes32 bp = _bp(_root(1, 1));
        vm.prank(ALICE);
        vm.expectRevert(abi.encodeWithSelector(AfrAnchor.NotNextEpoch.selector, uint64(2)));
        anchor.anchorBatch(2, roots, bp);
    }

    function test_anchorBatch_revertsOnWrongBackPointer() public {
        _anchorChain(ALICE, 1, 1);
        bytes32 expected = _bp(_root(1, 0));
        vm.prank(ALICE);
        vm.expectRevert(
            abi.encodeWithSelector(
                AfrAnchor.BadBackPointer.selector, uint64(1), expected, bytes32(0)
            )
        );
        anchor.anchorBatch(1, _batchRoots(1, 1, 2), bytes32(0));
    }

    function test_anchorBatch_revertsOnOverlap() public {
        _anchorChain(ALICE, 1, 3);
        bytes32[] memory same = _batchRoots(1, 1, 3);
        bytes32[] memory other = _batchRoots(2, 1, 3);
        bytes32 bp = _bp(_root(1, 0));
        // Re-sending epochs 1..3 where 1 and 2 are anchored with the same roots: a retry.
        vm.prank(ALICE);
        vm.expectRevert(
            abi.encodeWithSelector(AfrAnchor.AlreadyAnchored.selector, uint64(1), _root(1, 1))
        );
        anchor.anchorBatch(1, same, bp);
        // Same epochs with other roots: a fork.
        vm.prank(ALICE);
        vm.expectRevert(
            abi.encodeWithSelector(
                AfrAnchor.ConflictingRoot.selector, uint64(1), _root(1, 1), _root(2, 1)
            )
        );
        anchor.anchorBatch(1, other, bp);
    }

    // ---- head ----

    function test_head_acrossPowersOfTwo() public {
        _assertHead(ALICE, false, 0);
        bytes32 bp;
        for (uint256 e = 0; e < 70; ++e) {
            vm.prank(ALICE);
            anchor.anchor(uint64(e), _root(1, e), bp);
            bp = _bp(_root(1, e));
            _assertHead(ALICE, true, uint64(e));
        }
    }

    // ---- pure helpers ----

    function test_helpers_matchSpec() public view {
        vm.assertEq(anchor.leafHash(hex"0000000000000000"), sha256(hex"000000000000000000"), "leaf");
        bytes32 prev = _root(1, 0);
        vm.assertEq(anchor.backPointer(prev), _bp(prev), "backPointer");
        AfrAnchor.EpochHeader memory h = AfrAnchor.EpochHeader({
            epoch: 7,
            firstSeq: 700,
            count: 100,
            chainHead: _root(2, 0),
            prevRoot: _root(3, 0),
            sealedAtUs: 1_700_000_000_000_000
        });
        bytes32 merkleRoot = _root(4, 0);
        bytes memory packed = bytes.concat(
            "afr/v1/epoch-root",
            bytes20(address(ALICE)),
            bytes8(uint64(7)),
            bytes8(uint64(700)),
            bytes8(uint64(100)),
            merkleRoot,
            h.chainHead,
            h.prevRoot,
            bytes8(uint64(1_700_000_000_000_000))
        );
        vm.assertEq(packed.length, 165, "packed length");
        vm.assertEq(anchor.epochRoot(ALICE, h, merkleRoot), sha256(packed), "epochRoot");
    }

    /// @dev The worked example of docs/spec/anchor-contract.md, computed there with Python.
    function test_specExample() public {
        address recorder = address(0x0AF2af);
        bytes32 leaf0 = anchor.leafHash("afr example record");
        vm.assertEq(
            leaf0, 0x673abe6bee6fd6920e38b364ee5b19ca808d33e08e96ae8a599d36ff8b920efd, "leaf"
        );
        AfrAnchor.EpochHeader memory h0 = AfrAnchor.EpochHeader({
            epoch: 0,
            firstSeq: 0,
            count: 1,
            chainHead: bytes32(0x1111111111111111111111111111111111111111111111111111111111111111),
            prevRoot: bytes32(0),
            sealedAtUs: 1_767_225_600_000_000
        });
        bytes32 root0 = anchor.epochRoot(recorder, h0, leaf0);
        vm.assertEq(
            root0, 0x5bdfde77c26ddb274af22989251dc16f85017fed533c7f36a54c3ad445ba5521, "root0"
        );
        bytes32 bp1 = anchor.backPointer(root0);
        vm.assertEq(bp1, 0xc7916dcae50be9594f0d9f76abd5250ecaec8fdd40f9e3b1235f3603aeac5c4e, "bp1");

        bytes32[] memory proof = new bytes32[](1);
        proof[0] = anchor.leafHash("second");
        bytes32 leaf2 = anchor.leafHash("third");
        (bool valid, bytes32 merkle1) = anchor.merkleRootFromProof(leaf2, 1, 2, proof);
        vm.assertTrue(valid, "proof");
        vm.assertEq(
            merkle1, 0x34ccaf680fdf37740efda82ed072fc2d48c819d152cfd141a4e31d0ddb5a0cd8, "merkle1"
        );
        AfrAnchor.EpochHeader memory h1 = AfrAnchor.EpochHeader({
            epoch: 1,
            firstSeq: 1,
            count: 2,
            chainHead: bytes32(0x2222222222222222222222222222222222222222222222222222222222222222),
            prevRoot: root0,
            sealedAtUs: 1_767_225_660_000_000
        });
        bytes32 root1 = anchor.epochRoot(recorder, h1, merkle1);
        vm.assertEq(
            root1, 0x4ebf0dc64b7a2e0013adaa96b03ac4fd20de65301dda17ecd3d43facc9df270b, "root1"
        );

        vm.startPrank(recorder);
        anchor.anchor(0, root0, bytes32(0));
        anchor.anchor(1, root1, bp1);
        vm.stopPrank();
        vm.assertTrue(anchor.verifyInclusion(recorder, h1, leaf2, 1, proof), "verifyInclusion");
    }

    // ---- fuzz ----

    function testFuzz_anchor_chain(uint256 seed, uint256 n) public {
        n = bound(n, 1, 40);
        _anchorChain(ALICE, seed, n);
        _assertHead(ALICE, true, uint64(n - 1));
        for (uint256 e = 0; e < n; ++e) {
            vm.assertEq(anchor.rootOf(ALICE, uint64(e)), _root(seed, e), "rootOf");
        }
        vm.assertEq(anchor.rootOf(ALICE, uint64(n)), bytes32(0), "rootOf(head + 1)");
    }

    function testFuzz_anchor_rejectsAnyOtherBackPointer(uint256 n, bytes32 given) public {
        n = bound(n, 1, 8);
        _anchorChain(ALICE, 1, n);
        bytes32 expected = _bp(_root(1, n - 1));
        vm.assume(given != expected);
        vm.prank(ALICE);
        vm.expectRevert(
            abi.encodeWithSelector(AfrAnchor.BadBackPointer.selector, uint64(n), expected, given)
        );
        anchor.anchor(uint64(n), _root(1, n), given);
    }

    function testFuzz_anchor_rejectsNonNextEpoch(uint256 n, uint64 epoch) public {
        n = bound(n, 0, 8);
        _anchorChain(ALICE, 1, n);
        epoch = uint64(bound(epoch, n + 1, type(uint64).max));
        bytes32 bp = _bp(_root(1, epoch - 1));
        vm.prank(ALICE);
        vm.expectRevert(abi.encodeWithSelector(AfrAnchor.NotNextEpoch.selector, epoch));
        anchor.anchor(epoch, _root(1, epoch), bp);
    }

    function testFuzz_anchor_rejectsReanchoring(uint256 n, uint256 epoch, bytes32 root) public {
        n = bound(n, 1, 8);
        epoch = bound(epoch, 0, n - 1);
        vm.assume(root != 0);
        _anchorChain(ALICE, 1, n);
        bytes32 first = _root(1, epoch);
        bytes32 bp = epoch == 0 ? bytes32(0) : _bp(_root(1, epoch - 1));
        vm.prank(ALICE);
        if (root == first) {
            vm.expectRevert(
                abi.encodeWithSelector(AfrAnchor.AlreadyAnchored.selector, uint64(epoch), root)
            );
        } else {
            vm.expectRevert(
                abi.encodeWithSelector(
                    AfrAnchor.ConflictingRoot.selector, uint64(epoch), first, root
                )
            );
        }
        anchor.anchor(uint64(epoch), root, bp);
        vm.assertEq(anchor.rootOf(ALICE, uint64(epoch)), first, "root changed");
    }

    function testFuzz_anchorBatch_equalsSingleAnchors(uint256 seed, uint256 pre, uint256 n) public {
        pre = bound(pre, 0, 5);
        n = bound(n, 1, 12);
        _anchorChain(ALICE, seed, pre + n);
        _anchorChain(BOB, seed, pre);
        bytes32[] memory roots = _batchRoots(seed, pre, n);
        bytes32 bp = pre == 0 ? bytes32(0) : _bp(_root(seed, pre - 1));
        vm.prank(BOB);
        anchor.anchorBatch(uint64(pre), roots, bp);
        for (uint256 e = 0; e < pre + n; ++e) {
            vm.assertEq(anchor.rootOf(BOB, uint64(e)), anchor.rootOf(ALICE, uint64(e)), "root");
        }
        _assertHead(BOB, true, uint64(pre + n - 1));
    }

    function testFuzz_backPointer_matchesSpec(bytes32 prev) public view {
        vm.assertEq(anchor.backPointer(prev), _bp(prev), "backPointer");
    }
}
