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
    private var _drains = 0
    private var tookSinceDrain = false

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
    /// `fetchDidDrain` calls: each must follow bytes taken since the one before.
    var drains: Int { lock.withLock { _drains } }
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
            tookSinceDrain = true
            return _body.count
        }
        onBody?(total)
        if let stop = stopAfterBytes, total >= stop { return false }
        return true
    }

    /// When set, every other offer is answered `.pause` (so every byte comes twice) and the
    /// transfer is resumed from another thread through this box.
    var pausing: ResumeBox?
    private var offers = 0
    private var _pauses = 0
    var pauses: Int { lock.withLock { _pauses } }

    func fetchOffer(_ bytes: UnsafeRawBufferPointer) -> FetchFlow {
        guard let pausing else { return fetchDidReceive(bytes) ? .proceed : .stop }
        let pause: Bool = lock.withLock {
            offers += 1
            if offers % 2 == 1 { _pauses += 1 }
            return offers % 2 == 1
        }
        guard pause else { return fetchDidReceive(bytes) ? .proceed : .stop }
        DispatchQueue.global().async { pausing.resume() }
        return .pause
    }

    func fetchDidDrain() {
        lock.withLock {
            if !_finishes.isEmpty { _violations.append("drain after finish") }
            if !tookSinceDrain { _violations.append("drain without bytes taken since the last") }
            tookSinceDrain = false
            _drains += 1
        }
    }

    func fetchDidFinish(_ error: FetchError?) {
        lock.withLock {
            if !_finishes.isEmpty { _violations.append("second finish") }
            _finishes.append(error)
        }
        finished.fulfill()
    }
}

/// Resumes a transfer whose handle `start` may not have returned yet: a resume asked before the
/// handle is known happens when it is set.
final class ResumeBox: @unchecked Sendable {
    private let lock = NSLock()
    private var handle: FetchHandle?
    private var wanted = false

    func set(_ h: FetchHandle) {
        let resume: Bool = lock.withLock {
            handle = h
            defer { wanted = false }
            return wanted
        }
        if resume { h.resume() }
    }

    func resume() {
        let h: FetchHandle? = lock.withLock {
            if handle == nil { wanted = true }
            return handle
        }
        h?.resume()
    }
}
