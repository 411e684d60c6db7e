import CoreMetrics
import Foundation

/// Requests and bytes by origin (`scheme://host:port`, `EgressLedger.originKey`), and each
/// origin's requests a second over the last `window` seconds: what `--tpslimit` limits and an
/// origin's bill counts, for the status page and `/metrics`.
///
/// Design: the fetcher's transfer watcher (`FetchTracker`, its transfers' threads) counts a
/// request when it is answered or fails (retries and redirect hops each count, as each is a
/// request the origin saw) and a transfer's bytes when it ends: one short lock and a dictionary
/// look-up per request, nothing per received buffer (the origin's bytes total counts those).
/// At most `originLimit` origins get a row of their own; the rest share `otherOrigins`, so a
/// proxy asked for many hosts cannot grow this (or `/metrics`) without end.
public final class OriginTraffic: Sendable {
    /// Seconds the rate is measured over.
    public static let window = 10
    public static let originLimit = 64
    public static let otherOrigins = "other"

    private struct Row {
        let requests: Tally
        let bytes: Tally
        /// Requests in each of the last `window` seconds, by second (`second % window`).
        var perSecond = [Int64](repeating: 0, count: OriginTraffic.window)
        var seconds = [Int64](repeating: -1, count: OriginTraffic.window)

        func rate(now second: Int64) -> Double {
            var n: Int64 = 0
            for i in 0..<OriginTraffic.window where seconds[i] > second - Int64(OriginTraffic.window) && seconds[i] <= second {
                n += perSecond[i]
            }
            return Double(n) / Double(OriginTraffic.window)
        }
    }

    private let rows = LockedValue<[String: Row]>([:])
    private let factory: any MetricsFactory
    private let clock: EngineClock

    init(factory: any MetricsFactory, clock: EngineClock) {
        self.factory = factory
        self.clock = clock
    }

    /// A request to `url`'s origin was answered, or failed without an answer.
    public func noteRequest(url: String) {
        let second = Int64(clock.monotonic.nanoseconds / 1_000_000_000)
        update(url) { row in
            row.requests.add(1)
            let i = Int(second % Int64(Self.window))
            if row.seconds[i] != second {
                row.seconds[i] = second
                row.perSecond[i] = 0
            }
            row.perSecond[i] += 1
        }
    }

    /// A transfer from `url`'s origin ended, having brought `bytes`.
    public func noteBytes(url: String, _ bytes: Int64) {
        guard bytes > 0 else { return }
        update(url) { $0.bytes.add(bytes) }
    }

    private func update(_ url: String, _ change: (inout Row) -> Void) {
        let origin = EgressLedger.originKey(of: url) ?? Self.otherOrigins
        rows.withLock { rows in
            let key = rows[origin] != nil || rows.count < Self.originLimit ? origin : Self.otherOrigins
            var row = rows[key] ?? Row(requests: Tally("httpcachefs_origin_host_requests_total", [("origin", key)], factory),
                                       bytes: Tally("httpcachefs_origin_host_bytes_total", [("origin", key)], factory))
            change(&row)
            rows[key] = row
        }
    }

    /// Every origin asked since the start, by name.
    public func status() -> [OriginTrafficStatus] {
        let second = Int64(clock.monotonic.nanoseconds / 1_000_000_000)
        return rows.withLock { rows in
            rows.map { OriginTrafficStatus(origin: $0.key, requests: $0.value.requests.total, bytes: $0.value.bytes.total,
                                           requestsPerSecond: $0.value.rate(now: second)) }
        }.sorted { $0.origin < $1.origin }
    }

    /// Sets the requests-a-second gauges, just before a scrape.
    func recordGauges() {
        for o in status() {
            CoreMetrics.Gauge(label: "httpcachefs_origin_host_requests_per_second", dimensions: [("origin", o.origin)], factory: factory)
                .record(o.requestsPerSecond)
        }
    }
}

/// One origin's traffic in the status document (`StatusDocument.origins`).
public struct OriginTrafficStatus: Sendable, Codable, Equatable {
    /// `scheme://host:port`, or "other" for the origins past the first 64.
    public var origin: String
    /// Requests sent since the start (answered or failed, retries included).
    public var requests: Int64
    /// Body bytes received since the start, counted as each transfer ends.
    public var bytes: Int64
    /// Over the last 10 seconds.
    public var requestsPerSecond: Double
}
