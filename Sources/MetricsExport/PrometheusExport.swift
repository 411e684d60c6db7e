import CacheCore
import CoreMetrics
import Prometheus

/// The Prometheus backend for one cache's metrics: its own registry, the factory the engine
/// makes its metrics with, and the text exposition that `/metrics` serves.
///
/// CacheCore knows only swift-metrics; this is where the backend is chosen. One per engine
/// (never `MetricsSystem.bootstrap`: many engines live in one test process, each counting alone):
///
///     let export = PrometheusExport()
///     let engine = try CacheEngine(configuration: c, source: s, metricsFactory: export.factory)
///     let server = ProxyServer(engine: engine, configuration: p, logger: l,
///                              metricsText: { export.text(for: engine) })
public final class PrometheusExport: Sendable {
    public let registry: PrometheusCollectorRegistry
    /// Hand this to `CacheEngine(metricsFactory:)`.
    public let factory: PrometheusMetricsFactory

    public init() {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        // A hit is answered in microseconds, a miss waits a round trip or more.
        factory.defaultDurationHistogramBuckets = [
            .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1),
            .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
            .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500),
            .seconds(5), .seconds(10), .seconds(30),
        ]
        self.registry = registry
        self.factory = factory
    }

    /// The text exposition (format 0.0.4) of `engine`'s metrics, which must have been made with
    /// `factory`: its gauges are set first, and each family gets its `# HELP` line.
    public func text(for engine: CacheEngine) -> String {
        engine.recordMetricGauges()
        var text = Self.addingHelp(to: registry.emitToString())
        if let tier = engine.tier?.tierStatus() { text += Self.tierText(tier) }
        return text
    }

    /// The cache tier's families (`--tier`), written here: their labels (node URLs) come from
    /// the configuration, not from the engine's metrics.
    static func tierText(_ tier: TierStatus) -> String {
        func label(_ node: String) -> String {
            node.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        }
        var out = ""
        out += "# HELP httpcachefs_tier_bytes_total Bytes each cache tier node delivered (answers of the right version only).\n"
        out += "# TYPE httpcachefs_tier_bytes_total counter\n"
        for n in tier.nodes { out += "httpcachefs_tier_bytes_total{node=\"\(label(n.node))\"} \(n.bytes)\n" }
        out += "# HELP httpcachefs_tier_errors_total Failed or refused answers of each cache tier node.\n"
        out += "# TYPE httpcachefs_tier_errors_total counter\n"
        for n in tier.nodes { out += "httpcachefs_tier_errors_total{node=\"\(label(n.node))\"} \(n.errors)\n" }
        out += "# HELP httpcachefs_tier_backed_off 1 while a cache tier node is skipped after a failure.\n"
        out += "# TYPE httpcachefs_tier_backed_off gauge\n"
        for n in tier.nodes { out += "httpcachefs_tier_backed_off{node=\"\(label(n.node))\"} \(n.backedOff ? 1 : 0)\n" }
        out += "# HELP httpcachefs_tier_origin_bytes_total Bytes of tiered origins fetched from the origin itself (open-time checks, fallbacks).\n"
        out += "# TYPE httpcachefs_tier_origin_bytes_total counter\n"
        out += "httpcachefs_tier_origin_bytes_total \(tier.originBytes)\n"
        return out
    }

    /// Puts a `# HELP` line (from `CacheMetrics.help`) before each `# TYPE` line whose family
    /// has help text.
    static func addingHelp(to text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count + 4096)
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# TYPE "), let name = line.dropFirst(7).split(separator: " ").first,
               let help = CacheMetrics.help[String(name)] {
                out += "# HELP \(name) \(help)\n"
            }
            out += line
            out += "\n"
        }
        while out.hasSuffix("\n\n") { out.removeLast() }
        return out
    }
}
