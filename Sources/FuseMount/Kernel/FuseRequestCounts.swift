import Atomics

/// FUSE requests the loop received, by opcode: the round trips the kernel makes the daemon pay
/// for an operation (a `cat` of a cached file: `FuseRoundTripTests`). Counted on the loop thread
/// as each request is read (one relaxed increment); read from any thread.
final class FuseRequestCounts: Sendable {
    /// The opcodes of `fuse_kernel.h` that tests name.
    enum Opcode: UInt32, CaseIterable, Sendable {
        case lookup = 1, forget = 2, getattr = 3, open = 14, read = 15, release = 18, flush = 25
        case opendir = 27, readdir = 28, releasedir = 29, batchForget = 42, readdirplus = 44
    }

    /// Opcodes run to about 52 (Linux 6.18); higher ones share the last slot.
    private static let slots = 64
    private let counts: [ManagedAtomic<Int>] = (0..<FuseRequestCounts.slots).map { _ in ManagedAtomic(0) }

    /// One request whose header (`fuse_in_header`: length, then opcode) starts at `header`.
    func received(_ header: UnsafeRawPointer, length: Int) {
        guard length >= 8 else { return }
        let opcode = header.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
        counts[Int(min(opcode, UInt32(Self.slots - 1)))].wrappingIncrement(ordering: .relaxed)
    }

    func count(_ op: Opcode) -> Int { counts[Int(op.rawValue)].load(ordering: .relaxed) }

    /// Every opcode received and its count, by name (`#N` for one not named here).
    func snapshot() -> [String: Int] {
        var out: [String: Int] = [:]
        for (slot, counter) in counts.enumerated() {
            let n = counter.load(ordering: .relaxed)
            guard n > 0 else { continue }
            out[Opcode(rawValue: UInt32(slot)).map { "\($0)" } ?? "#\(slot)"] = n
        }
        return out
    }
}
