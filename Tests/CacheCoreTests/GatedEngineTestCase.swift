import XCTest
@testable import CacheCore
import TestSupport

/// An engine over a `GatedSource` with a 4 MiB file in 1 MiB slices, for tests that replay one
/// exact interleaving of transfers, readers, the writer and maintenance.
class GatedEngineTestCase: XCTestCase {
    var dir: String!
    let url = "http://origin.test/live/index.m3u8"
    let length: Int64 = 4 << 20
    lazy var data = randomBytes(Int(length), seed: 42)

    override func setUp() { dir = NSTemporaryDirectory() + "httpcachefs-gated-\(UUID().uuidString)" }
    override func tearDown() { try? FileManager.default.removeItem(atPath: dir) }

    func engine(_ source: GatedSource, capacity: Int64 = 1 << 30,
                writeBudget: (total: Int64, perTransfer: Int64)? = nil, retainBudget: Int64? = nil,
                ioThreads: Int? = nil, keyRules: KeyRules = KeyRules(), clock: EngineClock? = nil,
                wallClock: (@Sendable () -> Date)? = nil) throws -> CacheEngine {
        var configuration = CacheConfiguration(directory: dir, capacity: capacity, freeSpaceFloor: 0,
                                               sliceSize: 1 << 20, readTimeout: 10, initialReadAhead: 0, engineClock: .realTime)
        if let ioThreads { configuration.blockingIOThreads = ioThreads }
        configuration.keyRules = keyRules
        if let clock { configuration.engineClock = clock }
        if let wallClock { configuration.clock = wallClock }
        if let retainBudget { configuration.readRetentionBudget = retainBudget }
        if let writeBudget {
            configuration.writeBudget = writeBudget.total
            configuration.writeBudgetPerTransfer = writeBudget.perTransfer
        }
        return try CacheEngine(configuration: configuration, source: source)
    }

    /// Opens the file: the probe transfer delivers the first 256 KiB, and the writer writes them.
    func open(_ cache: CacheEngine, _ source: GatedSource) throws -> EntryInfo {
        let opened = expectation(description: "open")
        let box = ResultBox<EntryInfo>()
        cache.open(url: url) { box.set($0); opened.fulfill() }
        let probe = try XCTUnwrap(source.transfers.last)
        probe.partial(length: length)
        probe.send(data[Int(probe.request.start)..<Int(probe.request.end!)])
        probe.finish()
        wait(for: [opened], timeout: 5)
        cache.core.writes.waitIdle()
        return try box.get()
    }

    /// Caches the whole file through an engine of its own, then stops it: the next engine finds
    /// every slice on disk, unchecked.
    func cacheWholeFileThenStop() throws {
        let source = GatedSource()
        let cache = try engine(source)
        let info = try open(cache, source)
        let reader = cache.makeReader(for: info)
        let answered = expectation(description: "read")
        reader.read(offset: 256 << 10, length: Int(length - (256 << 10))) { _ in answered.fulfill() }
        for t in source.transfers.dropFirst() {
            t.partial(length: length)
            t.send(data[Int(t.request.start)..<Int(t.request.end ?? length)])
            t.finish()
        }
        wait(for: [answered], timeout: 30)
        reader.close()
        cache.core.writes.waitIdle()
        cache.shutdown()
    }

    /// The cache's data files.
    func dataFiles() -> [String] {
        let root = dir + "/data"
        return ((try? FileManager.default.subpathsOfDirectory(atPath: root)) ?? []).filter { $0.hasSuffix(".data") }
    }

    /// `data[from ..< from + count]`.
    func bytes(_ from: Int64, _ count: Int64) -> ArraySlice<UInt8> { data[Int(from)..<Int(from + count)] }
}

/// The replays of reader classes and read-ahead earning (`ReadPriorityReaderClassTests`,
/// `ReadAheadEarningTests`): one stream, 256 KiB of initial read-ahead, and reads whose
/// transfers the test serves at once.
extension GatedEngineTestCase {
    func oneStreamEngine(_ source: GatedSource) throws -> CacheEngine {
        let configuration = CacheConfiguration(directory: dir, capacity: 1 << 30, freeSpaceFloor: 0, sliceSize: 1 << 20,
                                               readTimeout: 10, initialReadAhead: 256 << 10, maxStreams: 1, engineClock: .realTime)
        return try CacheEngine(configuration: configuration, source: source)
    }

    /// Reads `count` at `offset` and serves what the transfer it started asks for; returns that
    /// transfer (nil: the read was a hit).
    func readServing(_ reader: CacheReader, _ offset: Int64, _ count: Int64, _ source: GatedSource) throws -> GatedSource.Transfer? {
        let before = source.transfers.count
        let answered = expectation(description: "read at \(offset)")
        let box = ResultBox<[UInt8]>()
        reader.read(offset: offset, length: Int(count)) { box.set($0); answered.fulfill() }
        let started = source.transfers.count > before ? source.transfers.last : nil
        if let t = started {
            t.partial(length: length)
            t.send(data[Int(t.request.start)..<Int(t.request.end!)])
            t.finish()
        }
        wait(for: [answered], timeout: 5)
        XCTAssertEqual(try box.get(), Array(bytes(offset, count)))
        return started
    }
}
