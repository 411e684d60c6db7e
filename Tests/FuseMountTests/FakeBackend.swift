@testable import CacheCore
import Foundation
import TestSupport
@testable import FuseMount

/// An in-memory cache stand-in: files by URL, with generations, scripted errors and silence.
/// Completions run on a background queue, like the engine's. A test waits for the backend to be
/// asked (`wait(until:)`), never on the clock.
final class FakeBackend: MountBackend, @unchecked Sendable {
    struct File {
        var bytes: [UInt8]
        var lastModified: String?
        var generation: Int64
        var finalURL: String?
    }

    /// A condition, not a plain lock: each open asked for wakes `wait(until:)`.
    private let lock = NSCondition()
    private var opensAsked = 0                       // guarded by lock
    private var files: [String: File] = [:]          // guarded by lock
    private var errors: [String: CacheError] = [:]   // guarded by lock
    private var silent: Set<String> = []             // guarded by lock
    private var held: Set<String> = []               // guarded by lock
    private var heldOpens: [() -> Void] = []         // guarded by lock
    private var observers: [@Sendable (EntryInfo) -> Void] = []  // guarded by lock
    private var openLog: [String] = []               // guarded by lock
    private(set) var reads: [(url: String, offset: Int64, length: Int)] = []  // guarded by lock
    private(set) var closedReaders = 0               // guarded by lock
    var capacity: Int64 = 1 << 30
    /// Give each URL a key (itself), so the mount keeps keys and asks for loads ahead by them.
    var keysByURL = false
    /// The keys of each `loadAhead` asked, in order.
    var loadedAhead: [[String]] { lock.withLock { aheadLog } }
    private var aheadLog: [[String]] = []            // guarded by lock
    /// Answer reads as the engine does when a read partly waited: file pieces around memory.
    var mixedLeases = false
    /// What the backend reports as its read timeout (listings are held to it).
    var readTimeout: TimeInterval?
    private var claimedLengths: [String: Int64] = [:]  // guarded by lock
    private var down = false                             // guarded by lock
    private let queue = DispatchQueue(label: "fake-backend", attributes: .concurrent)

    func setFile(_ url: String, _ bytes: [UInt8], lastModified: String? = "Mon, 01 Jan 2024 00:00:00 GMT",
                 finalURL: String? = nil) {
        let changed: EntryInfo? = lock.withLock {
            let gen = (files[url]?.generation ?? 0) + 1
            let hadFile = files[url] != nil
            files[url] = File(bytes: bytes, lastModified: lastModified, generation: gen, finalURL: finalURL)
            errors[url] = nil
            return hadFile ? info(url, files[url]!) : nil
        }
        if let changed { for o in lock.withLock({ observers }) { o(changed) } }
    }

    func setError(_ url: String, _ error: CacheError?) { lock.withLock { errors[url] = error } }
    func setSilent(_ url: String) { lock.withLock { _ = silent.insert(url) } }
    /// Opens of `url` wait until `releaseHeld()` (a refresh the test lets finish when it chooses).
    func setHeld(_ url: String) { lock.withLock { _ = held.insert(url) } }
    var heldCount: Int { lock.withLock { heldOpens.count } }

    /// True once `condition` holds, looked at again each time the backend is asked to open a
    /// URL; false if it still does not after `timeout` (a bound on a hang, never a measurement).
    /// `condition` runs without the lock.
    @discardableResult
    func wait(timeout: TimeInterval = 20, until condition: () -> Bool) -> Bool {
        lock.waitForChanges(of: { opensAsked }, timeout: timeout, until: condition)
    }

    func releaseHeld() {
        let opens: [() -> Void] = lock.withLock {
            held = []
            defer { heldOpens = [] }
            return heldOpens
        }
        opens.forEach { $0() }
    }
    /// Reports `length` for `url` whatever its bytes (an index holding a hostile length).
    func setClaimedLength(_ url: String, _ length: Int64) { lock.withLock { claimedLengths[url] = length } }
    /// The origin is down: what this backend answers is taken as the cache's copy, not asked
    /// (set the old bytes to stand for that copy).
    func setOriginDown(_ isDown: Bool) { lock.withLock { down = isDown } }
    func isOriginDown(url: String) -> Bool { lock.withLock { down } }
    var openCount: Int { lock.withLock { openLog.count } }
    /// The URLs opened, in order (read under the lock: FUSE threads append while tests look).
    var opens: [String] { lock.withLock { openLog } }
    var readLog: [(url: String, offset: Int64, length: Int)] { lock.withLock { reads } }
    var closedReaderCount: Int { lock.withLock { closedReaders } }

    private func info(_ url: String, _ f: File) -> EntryInfo {
        EntryInfo(key: try! KeyRules().key(for: url), url: url, finalURL: f.finalURL ?? url,
                  length: claimedLengths[url] ?? Int64(f.bytes.count),
                  contentType: nil, etag: "\"g\(f.generation)\"", lastModified: f.lastModified, acceptsRanges: true,
                  generation: f.generation, validatedAt: Date())
    }


    func open(url: String, completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) {
        let outcome: Result<EntryInfo, CacheError>? = lock.withLock {
            openLog.append(url)
            opensAsked += 1
            lock.broadcast()
            if silent.contains(url) { return nil }
            if held.contains(url) {
                heldOpens.append { [self] in
                    // Answered as it stands when released (not logged as a second open).
                    let outcome: Result<EntryInfo, CacheError> = lock.withLock {
                        if let e = errors[url] { return .failure(e) }
                        guard let f = files[url] else { return .failure(.notFound(url: url, status: 404)) }
                        return .success(info(url, f))
                    }
                    queue.async { completion(outcome) }
                }
                return nil
            }
            if let e = errors[url] { return .failure(e) }
            guard let f = files[url] else { return .failure(.notFound(url: url, status: 404)) }
            return .success(info(url, f))
        }
        guard let outcome else { return }
        queue.async { completion(outcome) }
    }

    func makeReader(for entry: EntryInfo) -> MountReader { Reader(backend: self, entry: entry) }

    var usage: CacheUsage { CacheUsage(bytes: 1 << 20, capacity: capacity, entries: 1) }

    func onRemoteChange(_ handler: @escaping @Sendable (EntryInfo) -> Void) { lock.withLock { observers.append(handler) } }

    final class Reader: MountReader, @unchecked Sendable {
        let backend: FakeBackend
        let entry: EntryInfo
        init(backend: FakeBackend, entry: EntryInfo) {
            self.backend = backend
            self.entry = entry
        }

        func read(offset: Int64, length: Int, completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) {
            let url = entry.url
            let outcome: Result<[UInt8], CacheError>? = backend.lock.withLock {
                backend.reads.append((url, offset, length))
                if backend.silent.contains(url) { return nil }
                if let e = backend.errors[url] { return .failure(e) }
                guard let f = backend.files[url] else { return .failure(.notFound(url: url, status: 404)) }
                let start = Int(min(offset, Int64(f.bytes.count)))
                let end = start + min(length, f.bytes.count - start)
                return .success(Array(f.bytes[start..<end]))
            }
            guard let outcome else { return }
            backend.queue.async { completion(outcome) }
        }

        func lease(offset: Int64, length: Int, completion: @escaping @Sendable (Result<ReadLease, CacheError>) -> Void) {
            let mixed = backend.mixedLeases
            read(offset: offset, length: length) { result in
                completion(result.map { bytes in mixed && bytes.count >= 3 ? Self.mixedLease(bytes) : ReadLease(bytes: bytes) })
            }
        }

        /// The first and last thirds of `bytes` from an (unlinked) file, the middle from memory.
        private static func mixedLease(_ bytes: [UInt8]) -> ReadLease {
            var template = Array((NSTemporaryDirectory() + "fake-lease-XXXXXX").utf8CString)
            let fd = mkstemp(&template)
            precondition(fd >= 0, "mkstemp")
            unlink(String(cString: template))
            bytes.withUnsafeBytes { precondition(pwrite(fd, $0.baseAddress, $0.count, 0) == $0.count) }
            let a = bytes.count / 3, b = 2 * bytes.count / 3
            return ReadLease(pieces: [.file(fd: fd, offset: 0, count: a), .memory(Array(bytes[a..<b])),
                                      .file(fd: fd, offset: Int64(b), count: bytes.count - b)],
                             files: [], onRelease: { _ = Glibc.close(fd) })
        }

        func close() { backend.lock.withLock { backend.closedReaders += 1 } }
    }
}

/// Deterministic test bytes: the one generator the origin serves too (`OriginServer.generatedBytes`),
/// so byte i of file `seed` is a hash of both and misplaced ranges show.
func testBytes(count: Int, seed: UInt64 = 1) -> [UInt8] {
    OriginServer.generatedBytes(seed: seed, offset: 0, count: count)
}

extension FakeBackend {
    func cacheKey(for url: String) -> CacheKey? { keysByURL ? CacheKey(rawValue: url) : nil }
    func loadAhead(keys: [CacheKey]) { lock.withLock { aheadLog.append(keys.map(\.string)) } }
}
