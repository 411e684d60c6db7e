import CacheCore
@testable import Fetcher
import XCTest

/// A tier transfer passes its sink's `resume()` to the attempt that paused, even when the
/// attempt's first bytes arrived, and paused it, before the attempt's handle was stored (its
/// source ran it on another thread at once). Scripted: the node source delivers inside `start`,
/// and the sink asks for the resume right there, so the order is the worst one, every time.
final class TierTransferResumeTests: XCTestCase {
    /// Delivers a head and its bytes inside `start`, offering them again on each `resume()`.
    final class InstantSource: RangeSource, @unchecked Sendable {
        let bytes: [UInt8]
        let lock = NSLock()
        var sink: FetchSink?
        var resumes = 0
        var finished = false

        init(bytes: [UInt8]) { self.bytes = bytes }

        func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
            lock.withLock { self.sink = sink }
            let head = ResponseHead(status: 206, finalURL: request.url, bodyStart: request.start, totalLength: 100,
                                    etag: "\"v1\"", acceptsRanges: true)
            guard sink.fetchDidReceiveHead(head) else { return Handle(source: self) }
            offer()
            return Handle(source: self)
        }

        func offer() {
            guard let sink = lock.withLock({ finished ? nil : self.sink }) else { return }
            let flow = bytes.withUnsafeBytes { sink.fetchOffer($0) }
            guard flow != .pause else { return }
            lock.withLock { finished = true }
            sink.fetchDidFinish(nil)
        }

        struct Handle: FetchHandle {
            let source: InstantSource
            func cancel() {}
            func resume() {
                source.lock.withLock { source.resumes += 1 }
                source.offer()
            }
        }
    }

    /// Pauses the first offer and asks the transfer to resume before answering.
    final class PausingSink: FetchSink, @unchecked Sendable {
        let lock = NSLock()
        var transfer: TierTransfer?
        var offers = 0
        var taken: [UInt8] = []
        var result: FetchError??

        func fetchDidReceiveHead(_ head: ResponseHead) -> Bool { true }
        func fetchDidReceive(_ bytes: UnsafeRawBufferPointer) -> Bool { fetchOffer(bytes) == .proceed }
        func fetchOffer(_ bytes: UnsafeRawBufferPointer) -> FetchFlow {
            let first: Bool = lock.withLock {
                offers += 1
                return offers == 1
            }
            if first {
                // The writer made room at once: the resume comes before the pause is even seen.
                lock.withLock { transfer }?.resume()
                return .pause
            }
            lock.withLock { taken += bytes }
            return .proceed
        }
        func fetchDidFinish(_ error: FetchError?) { lock.withLock { result = .some(error) } }
    }

    func testAResumeBeforeTheAttemptsHandleIsStoredReachesIt() throws {
        let piece = Array(UInt8(0)..<UInt8(40))
        let node = InstantSource(bytes: piece)
        let spec = TierSpec(scheme: "http", host: "origin", port: 80, nodes: ["http://node:8080"], sliceSize: 64 << 10)
        let tier = TierRangeSource(origin: node, tier: node, tiers: [spec], state: TierState(clock: { EngineClock.realTime.uptime }))
        var request = FetchRequest(url: "http://origin/f.bin", start: 0, end: 40, ifRange: "\"v1\"")
        request.expectedLength = 100
        let sink = PausingSink()
        let transfer = TierTransfer(request: request, sink: sink, version: try XCTUnwrap(TierVersion(request)),
                                    key: request.url, router: TierRouter(nodes: spec.nodes, sliceSize: spec.sliceSize),
                                    source: tier)
        sink.lock.withLock { sink.transfer = transfer }

        transfer.next()

        XCTAssertEqual(node.lock.withLock { node.resumes }, 1, "the early resume reached the attempt once its handle was stored")
        XCTAssertEqual(sink.lock.withLock { sink.taken }, piece, "the paused bytes came again and were taken")
        XCTAssertEqual(sink.lock.withLock { sink.result }, .some(nil), "the transfer finished")
    }
}
