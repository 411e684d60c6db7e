import Foundation
import TestSupport
import XCTest
@testable import CacheCore

/// A cache directory holding a library of small files, each wholly cached by an engine that then
/// stopped cleanly: where the tests of a start (`StartupCheckTests`, `StartCleanUpTests`) begin.
/// The directory goes with the object.
final class CachedLibrary {
    let files: Int
    let size: Int
    private let directory: TemporaryDirectory
    private let fileExtension: String

    var dir: String { directory.path }

    init(files: Int, size: Int, fileExtension: String, prefix: String) {
        (self.files, self.size, self.fileExtension) = (files, size, fileExtension)
        directory = TemporaryDirectory(prefix: prefix)
    }

    func url(_ n: Int) -> String { "http://origin.test/library/\(n).\(fileExtension)" }

    /// The tests' configuration: a roomy cap, 1 MiB slices, real time.
    func configuration() -> CacheConfiguration {
        CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0, sliceSize: 1 << 20, readTimeout: 10,
                           engineClock: .realTime)
    }

    /// Caches every file wholly through an engine of `configuration` and stops it cleanly.
    func fill(_ configuration: CacheConfiguration) async throws {
        let source = ScriptedSource()
        for n in 0..<files { source.set(url(n), .init(bytes: randomBytes(size, seed: UInt64(n)), etag: "\"\(n)\"")) }
        let cache = try CacheEngine(configuration: configuration, source: source)
        for n in 0..<files {
            let info = try await cache.open(url: url(n))
            let reader = cache.makeReader(for: info)
            _ = try await reader.read(offset: 0, length: size)
            reader.close()
        }
        cache.core.writes.waitIdle()
        cache.shutdown()
        XCTAssertEqual(dataFiles().count, files)
    }

    /// Every data file's path under `data/`, sorted.
    func dataFiles() -> [String] {
        ((try? FileManager.default.subpathsOfDirectory(atPath: dir + "/data")) ?? []).filter { $0.hasSuffix(".data") }.sorted()
    }

    /// The library's data files (the first `files` entry ids).
    func libraryFiles() -> [String] {
        dataFiles().filter { Int(($0 as NSString).lastPathComponent.prefix { $0 != "-" }).map { $0 <= files } ?? false }
    }

    /// Every file still wholly cached, and its data file there; `others`: whether data files
    /// beyond the library's may be there too (a test's own, kept).
    func assertWhollyCached(_ cache: CacheEngine, others: Bool = false, file: StaticString = #filePath, line: UInt = #line) {
        let partial = (0..<files).filter { cache.status(url: url($0))?.cachedBytes != Int64(size) }
        XCTAssertEqual(partial, [], "files no longer wholly cached", file: file, line: line)
        XCTAssertEqual((others ? libraryFiles() : dataFiles()).count, files, "data files deleted", file: file, line: line)
    }
}
