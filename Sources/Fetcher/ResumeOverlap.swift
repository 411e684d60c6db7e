/// The check that a resumed answer continues the bytes already delivered, for a version with no
/// strong validator (as the engine's overlap check, `VersionOverlap`). Pure value: no I/O, no clock.
///
/// With a strong ETag, a resume carries it in `If-Range`, and a replaced file answers 200 with
/// another ETag: `TransferState` sees the change in the head. Without one (no ETag, a weak one,
/// ETags ignored, or rotating ones) nothing in the head tells two versions of the same length
/// apart: a `Last-Modified` alone is kept by a same-second replacement (`cp -p`, `rsync -t`). So
/// the transfer keeps the last `length` bytes it delivered, a resume asks again from that many
/// bytes before the resume point, and those first bytes of the answer are compared with the kept
/// ones before anything new is delivered: other bytes are another version (the transfer ends with
/// `.remoteChanged`); the same ones are dropped, and the answer goes on.
///
/// Owned by one transfer (`TransferState`, `TierTransfer` under its lock): runs on that transfer's
/// thread, blocks on nothing; copies at most 8 KiB per delivered chunk, and only for such versions.
struct ResumeOverlap: Equatable {
    /// Bytes kept and asked again: a page, a few tenths of a percent of a resumed answer.
    static let length = 4096

    /// The last bytes delivered (at most `2 * length`; the last `length` of them count).
    private var kept: [UInt8] = []
    /// The bytes the current answer must start with, and how many of them matched so far.
    private var expected: ArraySlice<UInt8> = []
    private var matched = 0

    init() {}

    /// The kept bytes: the last `min(length, delivered)` bytes delivered.
    var tail: ArraySlice<UInt8> { kept.suffix(Self.length) }

    /// Bytes of the current answer still to compare before any is delivered.
    var pending: Int { expected.count - matched }

    /// Records bytes just delivered (after any compared ones).
    mutating func keep(_ bytes: UnsafeRawBufferPointer) {
        if bytes.count >= Self.length {
            kept = Array(bytes.suffix(Self.length))
            return
        }
        kept.append(contentsOf: bytes)
        if kept.count > 2 * Self.length { kept.removeFirst(kept.count - Self.length) }
    }

    /// A resume starts: returns how many bytes before the resume point to ask again (the kept
    /// ones, at most `limit`), which its answer must start with.
    mutating func beginResume(limit: Int = ResumeOverlap.length) -> Int {
        expected = tail.suffix(max(0, limit))
        matched = 0
        return expected.count
    }

    /// A new attempt that is not a resume (nothing to compare).
    mutating func beginFresh() {
        expected = []
        matched = 0
    }

    /// Compares the first of `bytes` (the answer's next ones) with what is still expected.
    /// Returns how many of them were compared (to drop), or nil when they differ.
    mutating func compare(_ bytes: UnsafeRawBufferPointer) -> Int? {
        let n = min(pending, bytes.count)
        guard n > 0 else { return 0 }
        let want = expected.dropFirst(matched).prefix(n)
        guard want.elementsEqual(bytes.prefix(n)) else { return nil }
        matched += n
        if matched == expected.count { beginFresh() }   // all compared: the kept bytes' buffer is theirs alone again
        return n
    }
}
