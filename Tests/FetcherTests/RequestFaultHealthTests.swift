import CacheCore
import Fetcher
import Foundation
import Logging
import TestSupport
import XCTest

/// A request's failure is the request's: the engine over the libcurl source and a loopback
/// origin. Requests that fail by their own fault (a raw space in the URL) or at a redirect's
/// target (a closed port, `file://`) are repeated, and the origin is never marked down: the next
/// good read of it works.
final class RequestFaultHealthTests: XCTestCase {
    var origin: OriginServer!
    var source: CurlRangeSource!
    let files = TemporaryDirectory(prefix: "httpcachefs-request-fault")
    let data: [UInt8] = OriginServer.generatedBytes(seed: 11, offset: 0, count: 300_000)

    override func setUpWithError() throws {
        origin = try OriginServer()
        origin.setFile("/good.bin", data: data)
        source = CurlRangeSource(configuration: FetcherConfiguration(clock: .realTime, userAgent: "httpcachefs-tests", connectTimeout: 5,
                                                                     lowSpeedTime: 10, maxRetries: 1, retryBaseDelay: 0.01),
                                 logger: Logger(label: "request-fault-tests"))
    }

    override func tearDown() {
        source?.shutdown()
        origin?.stop()
        files.remove()
    }

    func testBadRequestsRepeatedDoNotMakeTheNextGoodReadOfTheSameOriginFail() async throws {
        let closed = try OriginServer()
        let closedURL = closed.url("/gone.bin")
        closed.stop()
        origin.setFaults("/to-closed", Faults(redirectTo: closedURL))
        origin.setFaults("/to-file", Faults(redirectTo: "file:///etc/passwd"))
        let engine = try CacheEngine(configuration: CacheConfiguration(directory: files.path, freeSpaceFloor: 0, sliceSize: 1 << 20,
                                                                       revalidateAfter: 0, readTimeout: 10, engineClock: .realTime),
                                     source: source, layers: FetchLayers.standard())
        defer { engine.shutdown() }

        for round in 1...3 {
            for bad in [origin.url("/a b.bin"), origin.url("/to-closed"), origin.url("/to-file")] {
                do {
                    _ = try await engine.open(url: bad)
                    XCTFail("round \(round): \(bad) must fail")
                } catch {}
                XCTAssertFalse(engine.isOriginDown(url: origin.url("/good.bin")), "round \(round), after \(bad)")
            }
            let info = try await engine.open(url: origin.url("/good.bin"))
            let reader = engine.makeReader(for: info)
            let bytes = try await reader.read(offset: Int64(round) * 50_000, length: 1000)
            reader.close()
            XCTAssertEqual(bytes, Array(data[(round * 50_000)..<(round * 50_000 + 1000)]), "round \(round): the good read works")
        }
    }
}
