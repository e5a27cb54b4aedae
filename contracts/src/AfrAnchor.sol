// SPDX-License-Identifier: MIT OR Apache-2.0
pragma solidity 0.8.29;

/// @title AfrAnchor: append-only anchoring of Agent Flight Recorder epoch roots.
/// @notice Each recorder (the sending address) anchors the roots of its sealed epochs, in order
/// from epoch 0, one root per epoch, forever. Verifiers read a root with `rootOf` and check a
/// record's inclusion with `verifyInclusion`. There is no owner, no admin, no upgrade path and no
/// ether: the contract holds nothing but roots.
/// @dev Specification: docs/spec/anchor-contract.md. Byte formats (all integers big-endian):
///   epochRoot   = SHA-256("afr/v1/epoch-root" || recorder[20] || u64 epoch || u64 firstSeq ||
///                         u64 count || merkleRoot[32] || chainHead[32] || prevRoot[32] ||
///                         u64 sealedAtUs)
///   backPointer = 0 for epoch 0, else SHA-256("afr/v1/backptr" || rootOf(epoch - 1))
///   leafHash    = SHA-256(0x00 || record), node = SHA-256(0x01 || left || right)  (RFC 6962)
///
/// Storage is a single mapping recorder => epoch => root, and a zero root is never stored. The
/// anchored epochs of a recorder are always a contiguous prefix 0..head, because an epoch e > 0
/// is only written when e - 1 holds a root. So "root(e - 1) != 0 and root(e) == 0" already means
/// e == head + 1, and no separate head slot is written: a steady-state anchor reads the previous
/// root, reads and writes its own slot, logs and hashes once, under 50,000 gas (docs/gas.md).
contract AfrAnchor {
    /// @notice The header fields of a sealed epoch that, with its Merkle root, make up its root.
    /// @param epoch Epoch number, from 0.
    /// @param firstSeq Sequence number of the epoch's first record (leaf index 0).
    /// @param count Number of records (leaves) in the epoch; at least 1 for a provable epoch.
    /// @param chainHead Hash-chain head after the epoch's last record.
    /// @param prevRoot Root of the previous epoch, zero for epoch 0.
    /// @param sealedAtUs Sealing time, microseconds since the Unix epoch.
    struct EpochHeader {
        uint64 epoch;
        uint64 firstSeq;
        uint64 count;
        bytes32 chainHead;
        bytes32 prevRoot;
        uint64 sealedAtUs;
    }

    /// @notice Domain tag of the epoch root hash (17 ASCII bytes, no terminator).
    bytes17 public constant EPOCH_ROOT_TAG = "afr/v1/epoch-root";
    /// @notice Domain tag of the back-pointer hash (14 ASCII bytes, no terminator).
    bytes14 public constant BACK_POINTER_TAG = "afr/v1/backptr";
    /// @notice RFC 6962 prefix of a leaf hash.
    bytes1 public constant LEAF_PREFIX = 0x00;
    /// @notice RFC 6962 prefix of an interior node hash.
    bytes1 public constant NODE_PREFIX = 0x01;

    /// @dev recorder => epoch => root. Storage slot 0; the root of (recorder, epoch) lives at
    /// keccak256(abi.encode(epoch, keccak256(abi.encode(recorder, uint256(0))))).
    mapping(address recorder => mapping(uint64 epoch => bytes32 root)) private _roots;

    /// @notice A recorder anchored the root of one epoch.
    /// @param recorder The anchoring address (msg.sender).
    /// @param epoch The epoch anchored.
    /// @param root The epoch root now stored for (recorder, epoch).
    /// @param backPointer Zero for epoch 0, else SHA-256("afr/v1/backptr" || root of epoch - 1).
    event Anchored(
        address indexed recorder, uint64 indexed epoch, bytes32 root, bytes32 backPointer
    );

    /// @notice The root is zero, which is reserved to mean "not anchored".
    /// @param epoch The epoch whose root was zero.
    error ZeroRoot(uint64 epoch);

    /// @notice The epoch is already anchored with this very root (a retry; nothing to do).
    /// @param epoch The epoch.
    /// @param root Its anchored root, equal to the one sent.
    error AlreadyAnchored(uint64 epoch, bytes32 root);

    /// @notice The epoch is already anchored with a different root: the first root stays, and
    /// the attempt is a fork of the recorder's history.
    /// @param epoch The epoch.
    /// @param anchored The root anchored first, which stays.
    /// @param proposed The different root that was sent.
    error ConflictingRoot(uint64 epoch, bytes32 anchored, bytes32 proposed);

    /// @notice The epoch is not the recorder's next one: epoch - 1 is not anchored yet.
    /// Epochs start at 0 and are anchored without gaps; use `head` to find the next one.
    /// @param epoch The epoch that was sent.
    error NotNextEpoch(uint64 epoch);

    /// @notice The back-pointer sent is not the one the stored previous root implies.
    /// @param epoch The epoch being anchored.
    /// @param expected Zero for epoch 0, else SHA-256("afr/v1/backptr" || root of epoch - 1).
    /// @param given The back-pointer that was sent.
    error BadBackPointer(uint64 epoch, bytes32 expected, bytes32 given);

    /// @notice `anchorBatch` was called without roots.
    error EmptyBatch();

    /// @notice Anchors the root of the sender's next epoch.
    /// @dev Rules: root != 0; epoch 0 first, then exactly head + 1; a root once anchored never
    /// changes; prevBackPointer must be 0 for epoch 0, else backPointer(rootOf(sender, epoch - 1)).
    /// @param epoch The epoch to anchor: 0 for the first, else the current head + 1.
    /// @param root The epoch root (see `epochRoot`).
    /// @param prevBackPointer The back-pointer to the previous epoch's root (see `backPointer`).
    function anchor(uint64 epoch, bytes32 root, bytes32 prevBackPointer) external {
        mapping(uint64 => bytes32) storage roots = _roots[msg.sender];
        _checkLink(roots, epoch, prevBackPointer);
        _store(roots, epoch, root, prevBackPointer);
    }

    /// @notice Anchors the roots of several consecutive epochs, starting at `firstEpoch`.
    /// @dev Same rules as `anchor` for each epoch; the back-pointers after the first are computed
    /// here from the roots in the batch. All or nothing: any failure reverts the whole batch.
    /// @param firstEpoch The first epoch to anchor: 0 for the first ever, else head + 1.
    /// @param roots The roots of epochs firstEpoch, firstEpoch + 1, ... in order.
    /// @param prevBackPointer The back-pointer of `firstEpoch` (see `anchor`).
    function anchorBatch(uint64 firstEpoch, bytes32[] calldata roots, bytes32 prevBackPointer)
        external
    {
        uint256 n = roots.length;
        if (n == 0) revert EmptyBatch();
        mapping(uint64 => bytes32) storage stored = _roots[msg.sender];
        _checkLink(stored, firstEpoch, prevBackPointer);
        _store(stored, firstEpoch, roots[0], prevBackPointer);
        uint64 epoch = firstEpoch;
        for (uint256 i = 1; i < n; ++i) {
            ++epoch; // checked: an epoch past 2^64 - 1 reverts (unreachable in practice)
            _store(stored, epoch, roots[i], _backPointer(roots[i - 1]));
        }
    }

    /// @notice The root anchored by `recorder` for `epoch`, or zero if none (yet).
    /// @param recorder The recorder's address.
    /// @param epoch The epoch.
    /// @return The anchored epoch root, or bytes32(0) if the epoch is not anchored.
    function rootOf(address recorder, uint64 epoch) external view returns (bytes32) {
        return _roots[recorder][epoch];
    }

    /// @notice The last anchored epoch of `recorder`, for an anchorer that restarts.
    /// @dev Exponential then binary search over the contiguous prefix of anchored epochs:
    /// about 2 * log2(head) storage reads, meant for eth_call rather than transactions.
    /// @param recorder The recorder's address.
    /// @return any False if the recorder never anchored (its next epoch is 0).
    /// @return epoch The last anchored epoch when `any`, else 0; the next one is epoch + 1.
    function head(address recorder) external view returns (bool any, uint64 epoch) {
        mapping(uint64 => bytes32) storage roots = _roots[recorder];
        if (roots[0] == 0) return (false, 0);
        // Invariant of both loops: roots[lo] != 0, lo < hi, and hi > 2^64 - 1 or roots[hi] == 0.
        uint256 lo = 0;
        uint256 hi = 1;
        // casting to 'uint64' is safe because hi <= 2^64 - 1 is checked first
        // forge-lint: disable-next-line(unsafe-typecast)
        while (hi <= type(uint64).max && roots[uint64(hi)] != 0) {
            lo = hi;
            hi <<= 1;
        }
        while (hi - lo > 1) {
            uint256 mid = (lo + hi) >> 1;
            // casting to 'uint64' is safe because mid < hi <= 2^64
            // forge-lint: disable-next-line(unsafe-typecast)
            if (roots[uint64(mid)] != 0) lo = mid;
            else hi = mid;
        }
        // casting to 'uint64' is safe because lo < hi <= 2^64
        // forge-lint: disable-next-line(unsafe-typecast)
        return (true, uint64(lo));
    }

    /// @notice Whether the leaf `leaf` sits at `index` of the epoch `h` anchored by `recorder`.
    /// @dev Recomputes the Merkle root from the RFC 9162 inclusion proof (tree size h.count),
    /// then the epoch root from the header, and compares it with the anchored root. Returns
    /// false, never reverts, on an unknown epoch, a malformed proof or any mismatch.
    /// @param recorder The recorder's address.
    /// @param h The epoch header; h.epoch selects the anchored root.
    /// @param leaf The leaf hash, SHA-256(0x00 || record) (see `leafHash`).
    /// @param index The leaf index inside the epoch: seq - h.firstSeq.
    /// @param proof The audit path, from the leaf's sibling up to the root's child.
    /// @return True only if the proof leads to the anchored root.
    function verifyInclusion(
        address recorder,
        EpochHeader calldata h,
        bytes32 leaf,
        uint64 index,
        bytes32[] calldata proof
    ) external view returns (bool) {
        bytes32 anchored = _roots[recorder][h.epoch];
        if (anchored == 0) return false;
        (bool valid, bytes32 merkleRoot) = _rootFromProof(leaf, index, h.count, proof);
        return valid && _epochRoot(recorder, h, merkleRoot) == anchored;
    }

    /// @notice The Merkle root that an RFC 9162 (section 2.1.3.2) inclusion proof leads to.
    /// @param leaf The leaf hash.
    /// @param index The leaf index, below `size`.
    /// @param size The number of leaves in the tree, at least 1.
    /// @param proof The audit path; its length must be exactly what (index, size) requires.
    /// @return valid False if index >= size or the proof has the wrong length.
    /// @return root The recomputed root when `valid`, else zero.
    function merkleRootFromProof(bytes32 leaf, uint64 index, uint64 size, bytes32[] calldata proof)
        external
        pure
        returns (bool valid, bytes32 root)
    {
        return _rootFromProof(leaf, index, size, proof);
    }

    /// @notice The epoch root of header `h` with Merkle root `merkleRoot`, as anchored by `recorder`.
    /// @param recorder The recorder's address.
    /// @param h The epoch header.
    /// @param merkleRoot The RFC 6962 root over the epoch's h.count leaves.
    /// @return SHA-256 over the packed fields (see the contract documentation).
    function epochRoot(address recorder, EpochHeader calldata h, bytes32 merkleRoot)
        external
        pure
        returns (bytes32)
    {
        return _epochRoot(recorder, h, merkleRoot);
    }

    /// @notice The back-pointer that the epoch after the one with root `prevRoot` must carry.
    /// @param prevRoot The previous epoch's root.
    /// @return SHA-256("afr/v1/backptr" || prevRoot).
    function backPointer(bytes32 prevRoot) external pure returns (bytes32) {
        return sha256(abi.encodePacked(BACK_POINTER_TAG, prevRoot));
    }

    /// @notice The RFC 6962 leaf hash of a record.
    /// @param record The record's bytes.
    /// @return SHA-256(0x00 || record).
    function leafHash(bytes calldata record) external pure returns (bytes32) {
        return sha256(abi.encodePacked(LEAF_PREFIX, record));
    }

    /// @dev Checks that `epoch` is the next epoch of `roots` and that `given` is its back-pointer.
    function _checkLink(mapping(uint64 => bytes32) storage roots, uint64 epoch, bytes32 given)
        private
        view
    {
        bytes32 expected;
        if (epoch != 0) {
            bytes32 prev = roots[epoch - 1];
            if (prev == 0) revert NotNextEpoch(epoch);
            expected = _backPointer(prev);
        }
        if (given != expected) revert BadBackPointer(epoch, expected, given);
    }

    /// @dev Stores `root` for `epoch` if the epoch is free, and emits `Anchored`. The caller has
    /// checked that epoch - 1 is anchored, which keeps the anchored epochs a contiguous prefix.
    function _store(
        mapping(uint64 => bytes32) storage roots,
        uint64 epoch,
        bytes32 root,
        bytes32 backPointer_
    ) private {
        if (root == 0) revert ZeroRoot(epoch);
        // This cold read warms the slot, so the store below costs 20,000 instead of 22,100:
        // telling a retry from a fork is free.
        bytes32 existing = roots[epoch];
        if (existing != 0) {
            if (existing == root) revert AlreadyAnchored(epoch, root);
            revert ConflictingRoot(epoch, existing, root);
        }
        roots[epoch] = root;
        emit Anchored(msg.sender, epoch, root, backPointer_);
    }

    /// @dev RFC 9162 section 2.1.3.2, with fn/sn as in the RFC. The proof length is checked by
    /// the loop: sn reaches 0 exactly when the path to the root is complete.
    function _rootFromProof(bytes32 leaf, uint64 index, uint64 size, bytes32[] calldata proof)
        private
        pure
        returns (bool, bytes32)
    {
        if (index >= size) return (false, 0); // also rejects size == 0
        uint64 fn = index;
        uint64 sn = size - 1;
        bytes32 r = leaf;
        for (uint256 i = 0; i < proof.length; ++i) {
            if (sn == 0) return (false, 0); // proof too long
            if (fn & 1 == 1 || fn == sn) {
                r = _hashNode(proof[i], r);
                // fn is a right border node: skip the levels where it has no sibling.
                while (fn & 1 == 0 && fn != 0) {
                    fn >>= 1;
                    sn >>= 1;
                }
            } else {
                r = _hashNode(r, proof[i]);
            }
            fn >>= 1;
            sn >>= 1;
        }
        if (sn != 0) return (false, 0); // proof too short
        return (true, r);
    }

    function _epochRoot(address recorder, EpochHeader calldata h, bytes32 merkleRoot)
        private
        pure
        returns (bytes32)
    {
        return sha256(
            abi.encodePacked(
                EPOCH_ROOT_TAG,
                recorder,
                h.epoch,
                h.firstSeq,
                h.count,
                merkleRoot,
                h.chainHead,
                h.prevRoot,
                h.sealedAtUs
            )
        );
    }

    /// @dev SHA-256(BACK_POINTER_TAG || prevRoot), hashed in the scratch space (0x00..0x2d).
    /// The same bytes as `backPointer`, which is Solidity and pure; this one saves about 300 gas
    /// of memory handling per anchor (a precompile call cannot be made from pure assembly).
    function _backPointer(bytes32 prevRoot) private view returns (bytes32 bp) {
        bytes14 tag = BACK_POINTER_TAG;
        assembly ("memory-safe") {
            mstore(0x00, tag) // 14 tag bytes at 0x00..0x0d
            mstore(0x0e, prevRoot) // 32 root bytes at 0x0e..0x2d
            // SHA-256 precompile at 0x02; it only fails when out of gas.
            if iszero(staticcall(gas(), 0x02, 0x00, 0x2e, 0x00, 0x20)) { revert(0, 0) }
            bp := mload(0x00)
        }
    }

    function _hashNode(bytes32 left, bytes32 right) private pure returns (bytes32) {
        return sha256(abi.encodePacked(NODE_PREFIX, left, right));
    }
}
