import CacheCore
import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest
@testable import FuseMount

/// The real stack in process: loopback origin → libcurl source → cache engine in a temporary
/// directory → FUSE mount on a temporary directory.
final class EngineMount: Sendable {
    let origin: OriginServer
    let cacheDirectory: TemporaryDirectory
    let source: CurlRangeSource
    let engine: CacheEngine
    let mount: InProcessMount

    init(tree: (OriginServer) throws -> MountTreeSpec,
         cache: (inout CacheConfiguration) -> Void = { _ in },
         options: MountOptions = MountOptions(readDeadline: nil),
         fetcher: FetcherConfiguration = FetcherConfiguration(clock: .realTime, lowSpeedTime: 2, maxRetries: 1, retryBaseDelay: 0.05),
         setup: (OriginServer) -> Void = { _ in },
         engineLog: RecordedLog? = nil, probes: Scheduler = .shared) throws {
        try requireFuse()
        var logger = Logger(label: "fuse-engine-test")
        logger.logLevel = ProcessInfo.processInfo.environment["FUSE_TEST_LOG"] != nil ? .debug : .critical
        origin = try OriginServer()
        setup(origin)
        cacheDirectory = TemporaryDirectory(prefix: "httpcachefs-fuse-cache")
        var config = CacheConfiguration(directory: cacheDirectory.path, freeSpaceFloor: 0, sliceSize: 1 << 20, engineClock: .realTime)
        cache(&config)
        source = CurlRangeSource(configuration: fetcher, logger: logger)
        // `engineLog`: the engine's lines recorded, for a test that waits until the engine says.
        // `probes`: where the origin-health layer's probe timers run (a test's manual scheduler).
        engine = try CacheEngine(configuration: config, source: source, logger: engineLog?.logger ?? logger,
                                 layers: FetchLayers.standard(probes: probes))
        var opts = options
        opts.revalidateAfter = config.revalidateAfter
        mount = try InProcessMount(backend: EngineBackend(engine: engine), tree: try tree(origin), options: opts,
                                   logLevel: logger.logLevel)
    }

    func path(_ rel: String) -> String { mount.path(rel) }

    func stop() {
        mount.stop()
        engine.shutdown()
        source.shutdown()
        origin.stop()
        cacheDirectory.remove()
    }
}

/// `MountTreeSpec` from URL-list text.
func treeFromList(_ text: String, byURL: Bool = false) throws -> MountTreeSpec {
    try MountTreeSpec.build(urlList: try URLListParser.parse(text), byURL: byURL)
}


/// Runs `body` on its own thread and waits at most `seconds`: a hung file system call fails the
/// test instead of hanging the suite.
func withinBound<T>(_ seconds: TimeInterval, _ what: String, file: StaticString = #filePath, line: UInt = #line,
                    _ body: @escaping @Sendable () throws -> T) throws -> T {
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var result: Result<T, Error>?
    let t = Thread {
        result = Result { try body() }
        done.signal()
    }
    t.start()
    guard done.wait(timeout: .now() + seconds) == .success, let result else {
        XCTFail("\(what) did not return within \(Int(seconds))s", file: file, line: line)
        throw XCTSkip("hung: \(what)")
    }
    return try result.get()
}
