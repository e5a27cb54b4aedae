// SPDX-License-Identifier: MIT OR Apache-2.0
pragma solidity 0.8.29;

import {AfrAnchor} from "../src/AfrAnchor.sol";
import {Test} from "./utils/Test.sol";

/// @notice Inclusion proofs: RFC 6962 vectors, every leaf of trees of 1..64 leaves, negative
/// cases, and verifyInclusion end to end against anchored epochs.
contract InclusionTest is Test {
    /// @dev One RFC 6962 vector; fields in alphabetical order, as forge decodes JSON objects.
    struct Vector {
        bytes32 leafHash;
        uint256 leafIdx;
        string name;
        bytes32[] proof;
        bytes32 root;
        uint256 treeSize;
        bool wantErr;
    }

    /// @dev One case of inclusion-cases.json (scripts/gen-inclusion-cases.py); alphabetical.
    struct Case {
        uint256 index;
        bytes32 leafHash;
        bytes32[] proof;
        bytes32 root;
        uint256 size;
    }

    AfrAnchor internal anchor;
    Case[] internal cases;
    address internal constant RECORDER = address(0xAF2);

    function setUp() public {
        anchor = new AfrAnchor();
        string memory path = "contracts/test/vectors/inclusion-cases.json";
        Case[] memory parsed = abi.decode(vm.parseJson(vm.readFile(path), ".cases"), (Case[]));
        for (uint256 i = 0; i < parsed.length; ++i) {
            cases.push(parsed[i]);
        }
    }

    function _verifies(
        bytes32 leaf,
        uint256 index,
        uint256 size,
        bytes32[] memory proof,
        bytes32 root
    ) internal view returns (bool) {
        (bool valid, bytes32 got) = anchor.merkleRootFromProof(
            leaf, uint64(index), uint64(size), proof
        );
        return valid && got == root;
    }

    function _flip(bytes32 b) internal pure returns (bytes32) {
        return b ^ bytes32(uint256(1) << 77);
    }

    // ---- raw Merkle verification ----

    function test_rfc6962Vectors() public view {
        string memory path = "contracts/test/vectors/rfc6962-inclusion.json";
        Vector[] memory vs = abi.decode(vm.parseJson(vm.readFile(path), ".vectors"), (Vector[]));
        uint256 happy;
        for (uint256 i = 0; i < vs.length; ++i) {
            Vector memory v = vs[i];
            bool ok = _verifies(v.leafHash, v.leafIdx, v.treeSize, v.proof, v.root);
            vm.assertEq(ok, !v.wantErr, v.name);
            if (!v.wantErr) ++happy;
        }
        vm.assertEq(happy, 6, "happy-path vectors");
        vm.assertEq(vs.length, 72, "vectors");
    }

    function test_inclusionCases_allLeavesOfTrees1To64() public view {
        vm.assertEq(cases.length, 64 * 65 / 2, "cases");
        for (uint256 i = 0; i < cases.length; ++i) {
            Case memory c = cases[i];
            vm.assertTrue(_verifies(c.leafHash, c.index, c.size, c.proof, c.root), vm.toString(i));
        }
    }

    /// @dev Tampering with any input of any case makes it fail.
    function test_inclusionCases_tampered() public view {
        for (uint256 i = 0; i < cases.length; ++i) {
            Case memory c = cases[i];
            string memory id = vm.toString(i);
            // Flipped bit in the leaf, and in each proof element.
            vm.assertFalse(_verifies(_flip(c.leafHash), c.index, c.size, c.proof, c.root), id);
            for (uint256 j = 0; j < c.proof.length; ++j) {
                bytes32[] memory p = _copy(c.proof, c.proof.length);
                p[j] = _flip(p[j]);
                vm.assertFalse(_verifies(c.leafHash, c.index, c.size, p, c.root), id);
            }
            // Wrong index: a sibling index (the hashing order changes), or out of range.
            if ((c.index ^ 1) < c.size) {
                vm.assertFalse(_verifies(c.leafHash, c.index ^ 1, c.size, c.proof, c.root), id);
            }
            vm.assertFalse(_verifies(c.leafHash, c.size, c.size, c.proof, c.root), id);
            // Wrong size: zero, or one whose paths are longer.
            vm.assertFalse(_verifies(c.leafHash, c.index, 0, c.proof, c.root), id);
            // Doubling a power-of-two size adds a level to every path.
            if (c.size & (c.size - 1) == 0) {
                vm.assertFalse(_verifies(c.leafHash, c.index, c.size * 2, c.proof, c.root), id);
            }
            // Short and long proofs.
            if (c.proof.length > 0) {
                vm.assertFalse(
                    _verifies(
                        c.leafHash, c.index, c.size, _copy(c.proof, c.proof.length - 1), c.root
                    ),
                    id
                );
            }
            bytes32[] memory long = _copy(c.proof, c.proof.length + 1);
            long[c.proof.length] = c.root;
            vm.assertFalse(_verifies(c.leafHash, c.index, c.size, long, c.root), id);
        }
    }

    function test_merkleRootFromProof_rejectsEmptyTree() public view {
        (bool valid, bytes32 root) =
            anchor.merkleRootFromProof(bytes32(uint256(1)), 0, 0, new bytes32[](0));
        vm.assertFalse(valid, "size 0");
        vm.assertEq(root, bytes32(0), "root");
    }

    function testFuzz_merkleRootFromProof_neverReverts(
        bytes32 leaf,
        uint64 index,
        uint64 size,
        bytes32[] calldata proof
    ) public view {
        (bool valid, bytes32 root) = anchor.merkleRootFromProof(leaf, index, size, proof);
        if (!valid) vm.assertEq(root, bytes32(0), "root of an invalid proof");
    }

    function _copy(bytes32[] memory a, uint256 n) internal pure returns (bytes32[] memory b) {
        b = new bytes32[](n);
        for (uint256 i = 0; i < n && i < a.length; ++i) {
            b[i] = a[i];
        }
    }

    // ---- verifyInclusion end to end ----

    function _header(uint64 epoch, Case memory c, bytes32 prevRoot)
        internal
        pure
        returns (AfrAnchor.EpochHeader memory)
    {
        return AfrAnchor.EpochHeader({
            epoch: epoch,
            firstSeq: 1000 * uint64(epoch),
            count: uint64(c.size),
            chainHead: keccak256(abi.encode("chain-head", epoch)),
            prevRoot: prevRoot,
            sealedAtUs: 1_750_000_000_000_000 + uint64(epoch)
        });
    }

    /// @dev Anchors epochs 0..63, epoch e holding the tree of e + 1 leaves; returns the headers.
    function _anchorAllSizes()
        internal
        returns (AfrAnchor.EpochHeader[] memory hs, bytes32[] memory roots)
    {
        hs = new AfrAnchor.EpochHeader[](64);
        roots = new bytes32[](64);
        bytes32 prev;
        uint256 first; // index of the first case of each size
        for (uint64 e = 0; e < 64; ++e) {
            Case memory c = cases[first];
            hs[e] = _header(e, c, prev);
            roots[e] = anchor.epochRoot(RECORDER, hs[e], c.root);
            bytes32 bp = e == 0 ? bytes32(0) : anchor.backPointer(prev);
            vm.prank(RECORDER);
            anchor.anchor(e, roots[e], bp);
            prev = roots[e];
            first += c.size;
        }
    }

    function test_verifyInclusion_allCasesEndToEnd() public {
        (AfrAnchor.EpochHeader[] memory hs,) = _anchorAllSizes();
        for (uint256 i = 0; i < cases.length; ++i) {
            Case memory c = cases[i];
            AfrAnchor.EpochHeader memory h = hs[c.size - 1];
            vm.assertTrue(
                anchor.verifyInclusion(RECORDER, h, c.leafHash, uint64(c.index), c.proof),
                vm.toString(i)
            );
        }
    }

    function test_verifyInclusion_rejectsMismatches() public {
        (AfrAnchor.EpochHeader[] memory hs,) = _anchorAllSizes();
        // Leaf 5 of the 12-leaf epoch (epoch 11).
        uint256 at = 11 * 12 / 2 + 5;
        Case memory c = cases[at];
        vm.assertEq(c.size, 12, "case size");
        AfrAnchor.EpochHeader memory h = hs[11];
        uint64 idx = uint64(c.index);
        vm.assertTrue(anchor.verifyInclusion(RECORDER, h, c.leafHash, idx, c.proof), "happy path");

        // Unknown recorder, unknown epoch.
        vm.assertFalse(
            anchor.verifyInclusion(address(0xBAD), h, c.leafHash, idx, c.proof), "recorder"
        );
        AfrAnchor.EpochHeader memory w = h;
        w.epoch = 64;
        vm.assertFalse(
            anchor.verifyInclusion(RECORDER, w, c.leafHash, idx, c.proof), "unknown epoch"
        );

        // Each header field.
        w = _clone(h);
        w.epoch = 10;
        vm.assertFalse(anchor.verifyInclusion(RECORDER, w, c.leafHash, idx, c.proof), "epoch");
        w = _clone(h);
        w.firstSeq += 1;
        vm.assertFalse(anchor.verifyInclusion(RECORDER, w, c.leafHash, idx, c.proof), "firstSeq");
        w = _clone(h);
        w.count = 16; // a path of the same length, so only the root tells
        vm.assertFalse(anchor.verifyInclusion(RECORDER, w, c.leafHash, idx, c.proof), "count");
        w = _clone(h);
        w.count = 0;
        vm.assertFalse(anchor.verifyInclusion(RECORDER, w, c.leafHash, idx, c.proof), "count 0");
        w = _clone(h);
        w.chainHead = _flip(w.chainHead);
        vm.assertFalse(anchor.verifyInclusion(RECORDER, w, c.leafHash, idx, c.proof), "chainHead");
        w = _clone(h);
        w.prevRoot = _flip(w.prevRoot);
        vm.assertFalse(anchor.verifyInclusion(RECORDER, w, c.leafHash, idx, c.proof), "prevRoot");
        w = _clone(h);
        w.sealedAtUs += 1;
        vm.assertFalse(anchor.verifyInclusion(RECORDER, w, c.leafHash, idx, c.proof), "sealedAtUs");

        // Leaf, index, proof.
        vm.assertFalse(anchor.verifyInclusion(RECORDER, h, _flip(c.leafHash), idx, c.proof), "leaf");
        vm.assertFalse(anchor.verifyInclusion(RECORDER, h, c.leafHash, idx + 1, c.proof), "index");
        vm.assertFalse(
            anchor.verifyInclusion(RECORDER, h, c.leafHash, 12, c.proof), "index = count"
        );
        bytes32[] memory p = _copy(c.proof, c.proof.length);
        p[0] = _flip(p[0]);
        vm.assertFalse(anchor.verifyInclusion(RECORDER, h, c.leafHash, idx, p), "proof bit");
        p = _copy(c.proof, c.proof.length - 1);
        vm.assertFalse(anchor.verifyInclusion(RECORDER, h, c.leafHash, idx, p), "short proof");
        p = _copy(c.proof, c.proof.length + 1);
        vm.assertFalse(anchor.verifyInclusion(RECORDER, h, c.leafHash, idx, p), "long proof");
    }

    function testFuzz_verifyInclusion_neverReverts(
        address recorder,
        AfrAnchor.EpochHeader calldata h,
        bytes32 leaf,
        uint64 index,
        bytes32[] calldata proof
    ) public {
        _anchorAllSizes();
        anchor.verifyInclusion(recorder, h, leaf, index, proof);
        anchor.verifyInclusion(RECORDER, h, leaf, index, proof);
    }

    function _clone(AfrAnchor.EpochHeader memory h)
        internal
        pure
        returns (AfrAnchor.EpochHeader memory)
    {
        return AfrAnchor.EpochHeader(
            h.epoch, h.firstSeq, h.count, h.chainHead, h.prevRoot, h.sealedAtUs
        );
    }
}
