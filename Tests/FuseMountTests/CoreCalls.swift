import Foundation
import Logging
import XCTest
@testable import FuseMount
import CacheCore
import TestSupport

/// FileSystemCore without the kernel: each operation called and waited for, with a clock the
/// test moves. For behaviour that depends on time or on numbers the kernel never sends.
final class CoreCalls {
    let core: FileSystemCore
    let clock = MovableClock(start: Date(timeIntervalSince1970: 1_800_000_000))

    init(backend: MountBackend, tree: MountTreeSpec, options: MountOptions = MountOptions(), logger: Logger? = nil) {
        var logger = logger ?? Logger(label: "test.core")
        if logger.label == "test.core" { logger.logLevel = .critical }
        core = FileSystemCore(backend: backend, spec: tree, options: options, clock: clock.engineClock, logger: logger)
    }

    /// Waits for one completion (bounded: a completion that never comes fails the test).
    private func wait<T: Sendable>(_ what: String, _ call: (@escaping @Sendable (T) -> Void) -> Void) throws -> T {
        let done = DispatchSemaphore(value: 0)
        let answer = LockedValue<T?>(nil)
        call { value in answer.withLock { $0 = value }; done.signal() }
        guard done.wait(timeout: .now() + 20) == .success, let value = answer.withLock({ $0 }) else {
            XCTFail("\(what) never completed")
            throw XCTSkip("hung: \(what)")
        }
        return value
    }

    func list(_ ino: UInt64 = InodeTable.rootIno) throws -> Result<[String], FSErrno> {
        try wait("opendir") { core.opendir(ino, reply: $0) }.map { fh in
            defer { core.releasedir(fh: fh) }
            var names: [String] = []
            _ = core.readdir(fh: fh, offset: 2) { _, entry in names.append(entry.name); return true }
            return names
        }
    }

    func lookup(_ name: String, in parent: UInt64 = InodeTable.rootIno) throws -> Result<Attr, FSErrno> {
        try wait("lookup \(name)") { core.lookup(parent: parent, name: name, reply: $0) }
    }

    func getattr(_ ino: UInt64) throws -> Result<Attr, FSErrno> {
        try wait("getattr") { core.getattr(ino, reply: $0) }
    }

    func open(_ ino: UInt64) throws -> Result<OpenReply, FSErrno> {
        try wait("open") { core.open(ino, flags: O_RDONLY, reply: $0) }
    }

    func read(_ fh: UInt64, offset: Int64, size: Int) throws -> Result<[UInt8], FSErrno> {
        let leased: Result<ReadLease, FSErrno> = try wait("read") { done in
            core.read(fh: fh, offset: offset, size: size) { result, _ in done(result) }
        }
        return leased.flatMap { lease in
            defer { lease.release() }
            return (try? lease.bytes()).map { .success($0) } ?? .failure(FSErrno(EIO))
        }
    }
}
