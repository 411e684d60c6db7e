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
        return Self.addingHelp(to: registry.emitToString())
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
