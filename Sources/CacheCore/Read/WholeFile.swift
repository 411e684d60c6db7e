import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A fully cached version of a file, held whole: its data file open and every slice pinned until
/// `release()` (or deinit). For handing the file to the kernel, which then reads it without the
/// engine (FUSE passthrough): nothing of it may be evicted meanwhile, and a changed remote file
/// gets a new data file, so the bytes behind `fd` are this version's for as long as it is held.
public final class WholeFile: Sendable {
    /// The data file, read-only. Valid until the object is gone.
    public let fd: Int32
    public let generation: Int64
    private let onRelease: LockedValue<(@Sendable () -> Void)?>

    init(fd: Int32, generation: Int64, onRelease: @escaping @Sendable () -> Void) {
        self.fd = fd
        self.generation = generation
        self.onRelease = LockedValue(onRelease)
    }

    /// Lets eviction have the slices again. Idempotent.
    public func release() {
        onRelease.withLock { f in
            defer { f = nil }
            return f
        }?()
    }

    deinit {
        release()
        close(fd)
    }
}

extension CacheReader {
    /// This reader's version whole, for a front door that hands it to the kernel (FUSE
    /// passthrough), if every byte of it is on disk now; nil otherwise (the reader then reads
    /// through the engine as usual). Counts as one hit of the whole file: the kernel's reads are
    /// not seen. Hold it as long as the kernel may read the file.
    public func wholeFile() -> WholeFile? {
        let reader = state, core = self.core
        let key = reader.entry.key, generation = reader.entry.generation
        let shard = core.shard(for: key)
        let now = core.configuration.clock().timeIntervalSince1970
        let held: (EntryHandle, Int64, ClosedRange<Int64>)? = shard.locked { entries in
            guard let e = entries[key], e.isCurrent(generation), e.isPersisted,
                  let length = e.info.length, length > 0, e.coverage.contains(0..<length) else { return nil }
            // Handed to the kernel, bytes are no longer seen: only a file checked whole goes
            // (reads through the engine and the scrub check the rest; the next open gets it).
            guard core.verifier.unverifiedSlices(e, in: 0..<length).isEmpty else { return nil }
            let all = core.slices(of: 0..<length)
            e.pin(all, generation: generation)
            e.machine.wholeFileRead(length, door: reader.door, now: now)
            core.answers.touch(e, 0..<length, now)
            return (e.handle, e.id, all)
        }
        guard let (entry, id, all) = held else { return nil }
        let unpin: @Sendable () -> Void = { shard.locked { $0[entry]?.unpin(all, generation: generation) } }
        guard let fd = try? core.store.openForReading(entry: id, generation: generation) else {
            unpin()
            return nil
        }
        return WholeFile(fd: fd, generation: generation, onRelease: unpin)
    }
}
