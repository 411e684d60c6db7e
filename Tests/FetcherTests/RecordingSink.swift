import CacheCore
import Foundation
import XCTest

/// A scripted `FetchSink`: records what the source delivered and checks the call order the
/// `RangeSource` contract promises (head, body..., finish once, nothing after).
final class RecordingSink: FetchSink, @unchecked Sendable {
    private let lock = NSLock()
    private var _heads: [ResponseHead] = []
    private var _body: [UInt8] = []
    private var _finishes: [FetchError?] = []
    private var _violations: [String] = []

    /// Fulfilled by `fetchDidFinish` (over-fulfilment fails the test: "exactly once").
    let finished = XCTestExpectation(description: "fetchDidFinish")
    /// Answer to `fetchDidReceiveHead`.
    var acceptHead = true
    /// Return false from `fetchDidReceive` once this many body bytes arrived.
    var stopAfterBytes: Int?
    /// Called (on the source's thread) after each body chunk with the body size so far.
    var onBody: ((Int) -> Void)?

    var heads: [ResponseHead] { lock.withLock { _heads } }
    var body: [UInt8] { lock.withLock { _body } }
    var finishes: [FetchError?] { lock.withLock { _finishes } }
    var violations: [String] { lock.withLock { _violations } }
    /// The single finish result (nil = success); fails the test if there was not exactly one.
    func result(file: StaticString = #filePath, line: UInt = #line) -> FetchError? {
        let f = finishes
        XCTAssertEqual(f.count, 1, "fetchDidFinish calls", file: file, line: line)
        return f.first ?? nil
    }

    func fetchDidReceiveHead(_ head: ResponseHead) -> Bool {
        lock.withLock {
            if !_finishes.isEmpty { _violations.append("head after finish") }
            if !_heads.isEmpty { _violations.append("second head") }
            _heads.append(head)
        }
        return acceptHead
    }

    func fetchDidReceive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let total: Int = lock.withLock {
            if !_finishes.isEmpty { _violations.append("body after finish") }
            if _heads.isEmpty { _violations.append("body before head") }
            _body.append(contentsOf: bytes)
            return _body.count
        }
        onBody?(total)
        if let stop = stopAfterBytes, total >= stop { return false }
        return true
    }

    func fetchDidFinish(_ error: FetchError?) {
        lock.withLock {
            if !_finishes.isEmpty { _violations.append("second finish") }
            _finishes.append(error)
        }
        finished.fulfill()
    }
}
