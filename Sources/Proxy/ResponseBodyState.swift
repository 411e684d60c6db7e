/// Where one response body stands, as a pure state machine: what to send or read next, and what
/// each read's outcome means. `ResponseStream` carries out the actions on a channel.
///
/// A body is a list of parts (framing literals of a multipart answer, byte ranges of the file),
/// or the file "until its end" (a length not known yet). Ranges are read in chunks: a small first
/// one (the head waits for it, so an origin error can still become a status) and larger ones
/// after. At most one read is in flight; a read is issued only while the channel is writable.
struct ResponseBodyState {
    static let firstChunk = 64 << 10
    static let chunk = 1 << 20

    enum Phase: Equatable {
        case sending
        /// A read is in flight.
        case reading
        /// Paused until the channel drains.
        case waitingForWritable
        case done
    }

    enum Action: Equatable {
        /// Send these framing bytes (they do not commit the head).
        case literal([UInt8])
        /// Lease `length` bytes of the file at `offset`.
        case read(offset: Int64, length: Int)
        /// Stop until the channel is writable again.
        case waitForWritable
        /// Everything was sent: send the head if it is still held, then end the response.
        case finish
        /// A read is in flight, or the body is over: nothing to do now.
        case none
    }

    enum ReadOutcome: Equatable {
        /// Send the bytes, then ask `next` again.
        case send
        /// The file ended where an "until the end" body ends: finish.
        case finish
        /// The file ended before the length the head announced.
        case fail(String)
    }

    private let parts: [BodyPart]
    private let untilEnd: Bool
    private(set) var phase: Phase = .sending
    private var partIndex = 0
    private var offsetInPart: Int64 = 0
    private var nextChunk = ResponseBodyState.firstChunk
    private(set) var bodyBytesSent: Int64 = 0

    init(_ body: ResponseBody) {
        switch body {
        case let .parts(p): parts = p; untilEnd = false
        case .untilEnd: parts = []; untilEnd = true
        }
    }

    /// The next step; `writable` is the channel's state now. Call again after a `.literal`.
    mutating func next(writable: Bool) -> Action {
        guard phase == .sending || phase == .waitingForWritable else { return .none }
        if untilEnd { return readIfWritable(offset: offsetInPart, length: nextChunk, writable: writable) }
        while partIndex < parts.count {
            switch parts[partIndex] {
            case let .literal(bytes):
                partIndex += 1
                phase = .sending
                return .literal(bytes)
            case let .bytes(range):
                let start = range.lowerBound + offsetInPart
                guard start < range.upperBound else {
                    partIndex += 1
                    offsetInPart = 0
                    continue
                }
                return readIfWritable(offset: start, length: Int(min(Int64(nextChunk), range.upperBound - start)),
                                      writable: writable)
            }
        }
        phase = .done
        return .finish
    }

    private mutating func readIfWritable(offset: Int64, length: Int, writable: Bool) -> Action {
        guard writable else {
            phase = .waitingForWritable
            return .waitForWritable
        }
        phase = .reading
        return .read(offset: offset, length: length)
    }

    /// The read in flight brought `count` bytes.
    mutating func didRead(count: Int) -> ReadOutcome {
        guard phase == .reading else { return .fail("no read was in flight") }
        phase = .sending
        if count == 0 {
            phase = .done
            return untilEnd ? .finish : .fail("the file ended before its announced length")
        }
        offsetInPart += Int64(count)
        bodyBytesSent += Int64(count)
        nextChunk = Self.chunk
        return .send
    }

    /// The channel drained: reads may go on.
    mutating func writable() -> Bool {
        guard phase == .waitingForWritable else { return false }
        phase = .sending
        return true
    }

    /// The response ended early (an error, the client went away).
    mutating func stop() { phase = .done }

    var waitingForWritable: Bool { phase == .waitingForWritable }
    var isDone: Bool { phase == .done }
}
