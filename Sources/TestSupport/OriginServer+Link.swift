import Foundation

// Link emulation: the loopback origin behaves as if it sat behind a real network link, so the
// benchmarks can compare the cache with curl under the same latency and bandwidth.
//
// Three knobs, each optional:
// - a one-way delay: the response head leaves one round trip (2 × one way: request in, response
//   out) after the request arrived; body bytes then follow at the link's rate;
// - a per-connection rate (one TCP stream's share of a path);
// - a shared rate across all connections (the access link), so parallel streams help only up to it.
//
// Pacing is a token bucket per connection and a shared one, in their virtual-time form (as GCRA):
// instead of a token count, which overflows while a timer is late and then loses the time, each
// bucket keeps the time it is free again. A connection sends its body in quanta (about 2 ms of its
// rate); before sending one it reserves the quantum's departure on its own bucket, then on the
// shared one. A quantum leaves when its last byte would have crossed both links (pay before
// sending), so a response of n bytes completes n / rate after its head, as on a real link.
// Reservations are taken in turn as each connection sends, which serves parallel streams
// round-robin on the shared link. Timers that fire late are caught up within `slack`, so a loaded
// machine still meets the rate on average; an idle connection starts its next body with an empty
// link (no burst).

/// The network between the benchmark's clients and the origin. `nil` fields are "no limit".
public struct LinkEmulation: Sendable, Equatable {
    /// One way; the response head waits twice this.
    public var oneWayDelay: TimeInterval
    /// Rate of each connection, in bytes per second.
    public var bytesPerSecondPerConnection: Double?
    /// Rate shared by all connections together, in bytes per second.
    public var bytesPerSecondShared: Double?

    public init(oneWayDelay: TimeInterval, bytesPerSecondPerConnection: Double?, bytesPerSecondShared: Double?) {
        precondition(oneWayDelay >= 0, "negative delay")
        precondition((bytesPerSecondPerConnection ?? 1) > 0 && (bytesPerSecondShared ?? 1) > 0, "rates must be positive")
        self.oneWayDelay = oneWayDelay
        self.bytesPerSecondPerConnection = bytesPerSecondPerConnection
        self.bytesPerSecondShared = bytesPerSecondShared
    }

    /// A link given in milliseconds and Mbit/s (10^6 bits), as network people write it; 0 turns a
    /// knob off.
    public static func milliseconds(_ oneWay: Double, perConnectionMbit: Double, sharedMbit: Double) -> LinkEmulation {
        LinkEmulation(oneWayDelay: oneWay / 1000,
                      bytesPerSecondPerConnection: perConnectionMbit > 0 ? perConnectionMbit * 1e6 / 8 : nil,
                      bytesPerSecondShared: sharedMbit > 0 ? sharedMbit * 1e6 / 8 : nil)
    }

    /// The wait before a response head.
    public var roundTrip: TimeInterval { 2 * oneWayDelay }
}

extension OriginServer {
    /// Puts every later response behind `link` (nil: plain loopback again). Responses already
    /// streaming keep the link they started with.
    public func emulateLink(_ link: LinkEmulation?) {
        state.link = link.map(SharedLink.init)
    }
}

/// One emulated link as all connections share it: the configuration and the shared link's
/// reservation clock.
final class SharedLink: @unchecked Sendable {
    let emulation: LinkEmulation
    /// Bytes per pacing step: about 2 ms of the slowest rate, so timers stay coarse enough to be
    /// cheap and fine enough that a 64 KiB read still takes its transfer time.
    let quantum: Int64
    /// How far behind real time a reservation may start: a timer that fired late catches up
    /// this much, instead of the link losing the time.
    static let slack: UInt64 = 10_000_000

    private let lock = NSLock()
    /// Uptime (ns) at which the shared link has sent everything reserved so far.
    private var sharedFree: UInt64 = 0  // guarded by lock

    init(_ emulation: LinkEmulation) {
        self.emulation = emulation
        let slowest = [emulation.bytesPerSecondPerConnection, emulation.bytesPerSecondShared].compactMap { $0 }.min()
        quantum = slowest.map { Int64(min(max($0 * 0.002, 4096), 65536)) } ?? 65536
    }

    var isPaced: Bool { emulation.bytesPerSecondPerConnection != nil || emulation.bytesPerSecondShared != nil }

    /// Reserves `bytes` on the shared link, departing no earlier than `notBefore`; returns the
    /// departure (uptime ns).
    func reserveShared(_ bytes: Int64, notBefore: UInt64, now: UInt64) -> UInt64 {
        guard let rate = emulation.bytesPerSecondShared else { return notBefore }
        return lock.withLock {
            let start = max(sharedFree, now &- min(now, Self.slack))
            let departure = max(start + Self.nanoseconds(bytes, rate), notBefore)
            sharedFree = departure
            return departure
        }
    }

    /// The time `bytes` take at `rate` bytes per second.
    static func nanoseconds(_ bytes: Int64, _ rate: Double) -> UInt64 { UInt64((Double(bytes) * 1e9 / rate).rounded()) }
}

/// The pacing of one response body on one connection. Event-loop confined (the shared link
/// does its own locking).
final class LinkPacer {
    enum Admission: Equatable {
        /// Send this many bytes now.
        case send(Int64)
        /// Nothing may leave before this uptime (ns); call again then.
        case wait(until: UInt64)
    }

    private let link: SharedLink
    /// Uptime (ns) at which this connection has sent everything reserved so far.
    private var connectionFree: UInt64
    /// The quantum reserved and not yet sent.
    private var pending: (bytes: Int64, departure: UInt64)?

    /// A body starts on an idle link: its first quantum leaves one quantum's time from `now`.
    init(link: SharedLink, now: UInt64) {
        self.link = link
        connectionFree = now
    }

    /// How much of the `wanted` bytes may be written now.
    func admit(_ wanted: Int64, now: UInt64) -> Admission {
        let p: (bytes: Int64, departure: UInt64)
        if let pending {
            p = pending
        } else {
            let bytes = min(wanted, link.quantum)
            var departure = max(connectionFree, now &- min(now, SharedLink.slack))
            if let rate = link.emulation.bytesPerSecondPerConnection {
                departure += SharedLink.nanoseconds(bytes, rate)
            }
            departure = link.reserveShared(bytes, notBefore: departure, now: now)
            connectionFree = departure
            p = (bytes, departure)
            pending = p
        }
        guard p.departure <= now else { return .wait(until: p.departure) }
        pending = nil
        return .send(min(p.bytes, wanted))
    }
}
