import Foundation
import Logging
import TestSupport
import XCTest
@testable import CacheCore

/// A start never deletes what it could not look at, and knows whether the last stop was clean.
final class StartupCheckTests: XCTestCase {
    private let library = CachedLibrary(files: 60, size: 20_000, fileExtension: "ts", prefix: "httpcachefs-startup")
    private var dir: String { library.dir }
    private var files: Int { library.files }
    private var size: Int { library.size }
    private func url(_ n: Int) -> String { library.url(n) }
    private func configuration() -> CacheConfiguration { library.configuration() }

    private func engine(_ configuration: CacheConfiguration? = nil, log: RecordedLog? = nil) throws -> CacheEngine {
        try CacheEngine(configuration: configuration ?? self.configuration(), source: ScriptedSource(),
                        logger: log?.logger ?? Logger(label: "test"))
    }

    private func cacheLibrary() async throws { try await library.fill(configuration()) }
    private func dataFiles() -> [String] { library.dataFiles() }

    private func assertWhollyCached(_ cache: CacheEngine, file: StaticString = #filePath, line: UInt = #line) {
        library.assertWhollyCached(cache, file: file, line: line)
    }

    /// The case: more cached files than the soft open-file limit allows open at once.
    /// The check used to hold every data file open, took EMFILE for a missing file, and deleted
    /// the rest of the library.
    func testARestartUnderALowOpenFileLimitKeepsEveryFile() async throws {
        try await cacheLibrary()
        var saved = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &saved), 0)
        var low = saved
        low.rlim_cur = rlim_t(Self.limitLeaving(free: files / 3))
        XCTAssertEqual(setrlimit(Int32(RLIMIT_NOFILE.rawValue), &low), 0)
        let log = RecordedLog()
        let opened: Result<CacheEngine, Error> = Result { try engine(log: log) }
        XCTAssertEqual(setrlimit(Int32(RLIMIT_NOFILE.rawValue), &saved), 0)
        let cache = try opened.get()
        defer { cache.shutdown() }
        assertWhollyCached(cache)
        XCTAssertFalse(log.lines.contains { $0.contains("cleaning the cache") }, log.lines.joined(separator: "\n"))
    }

    /// Out of descriptors, no permission, an I/O error: only "no such file" means missing.
    func testAFileThatCannotBeOpenedIsKeptWithItsRowsAndAWarning() async throws {
        try await cacheLibrary()
        var failing = configuration()
        let refused: [Int32] = [EMFILE, EACCES, EIO]
        failing.openDataFileForCheck = { path in
            let name = (path as NSString).lastPathComponent
            let n = Int(name.prefix { $0 != "-" }) ?? 1   // the entry id: every other one fails
            guard n % 2 == 0 else { return open(path, O_RDONLY | O_CLOEXEC) }
            errno = refused[n % refused.count]
            return -1
        }
        let log = RecordedLog()
        let cache = try engine(failing, log: log)
        defer { cache.shutdown() }
        assertWhollyCached(cache)
        XCTAssertTrue(log.lines.contains { $0.hasPrefix("warning cannot check a data file") }, log.lines.joined(separator: "\n"))
    }

    /// A missing file is still missing: its rows go, and the file's bytes are fetched again.
    func testAMissingFileLosesItsRows() async throws {
        try await cacheLibrary()
        let gone = try XCTUnwrap(dataFiles().first)
        XCTAssertEqual(unlink(dir + "/data/" + gone), 0)
        let cache = try engine()
        defer { cache.shutdown() }
        let whole = (0..<files).filter { cache.status(url: url($0))?.cachedBytes == Int64(size) }
        XCTAssertEqual(whole.count, files - 1)
    }

    func testACleanStopLeavesNoWriteAheadLogAndTheNextStartSaysClean() async throws {
        try await cacheLibrary()
        let wal = dir + "/index.sqlite-wal"
        var st = stat()
        XCTAssertTrue(stat(wal, &st) != 0 || st.st_size == 0, "the WAL holds \(st.st_size) bytes after a clean stop")
        let log = RecordedLog()
        let cache = try engine(log: log)
        defer { cache.shutdown() }
        XCTAssertEqual(cache.core.previousStop, .clean)
        XCTAssertTrue(log.lines.contains { $0.hasPrefix("info cache opened after a clean stop") }, log.lines.joined(separator: "\n"))
        assertWhollyCached(cache)
    }

    /// A process that ends with the cache open (here: its lock let go, its index never closed).
    func testAStartAfterAnUncleanStopSaysUnclean() async throws {
        try await cacheLibrary()
        let crashed = try engine()
        crashed.core.directoryLock.release()
        let log = RecordedLog()
        let cache = try engine(log: log)
        defer { cache.shutdown() }
        XCTAssertEqual(cache.core.previousStop, .unclean)
        XCTAssertTrue(log.lines.contains { $0.hasPrefix("notice cache opened after an unclean stop") }, log.lines.joined(separator: "\n"))
        assertWhollyCached(cache)
        withExtendedLifetime(crashed) {}
    }

    /// The soft limit under which exactly `free` more descriptors can be opened now (a new
    /// descriptor takes the lowest free number, and must be below the limit).
    private static func limitLeaving(free: Int) -> Int {
        let open = Set(((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap { Int($0) })
        var limit = 0, left = 0
        while left < free {
            if !open.contains(limit) { left += 1 }
            limit += 1
        }
        return limit
    }
}
