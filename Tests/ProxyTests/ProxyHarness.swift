import CacheCore
import Fetcher
import Foundation
import Logging
import MetricsExport
import Proxy
import TestSupport
import XCTest

/// The whole front door on loopback: an in-process origin, the libcurl source, a real engine in
/// a temporary directory, and the proxy on a free port.
final class ProxyHarness: Sendable {
    let origin: OriginServer
    let directory: TemporaryDirectory
    let source: CurlRangeSource
    let engine: CacheEngine
    let server: ProxyServer
    let port: Int
    let configuration: ProxyConfiguration

    init(configuration: ProxyConfiguration = ProxyConfiguration(port: 0),
         cache: (String) -> CacheConfiguration = { CacheConfiguration(directory: $0, engineClock: .realTime) },
         fetcher: FetcherConfiguration = FetcherConfiguration(clock: .realTime, lowSpeedTime: 2, maxRetries: 0),
         logger: Logger? = nil) throws {
        var defaultLogger = Logger(label: "proxy-test")
        defaultLogger.logLevel = ProcessInfo.processInfo.environment["PROXY_TEST_LOG"] != nil ? .debug : .critical
        let logger = logger ?? defaultLogger
        origin = try OriginServer()
        directory = TemporaryDirectory(prefix: "httpcachefs-proxy")
        source = CurlRangeSource(configuration: fetcher, logger: logger)
        let metrics = PrometheusExport()
        engine = try CacheEngine(configuration: cache(directory.path), source: source, logger: logger,
                                 metricsFactory: metrics.factory, layers: FetchLayers.standard())
        var config = configuration
        config.cacheDirectory = directory.path
        config.version = "test"
        self.configuration = config
        let engine = self.engine
        server = ProxyServer(engine: engine, configuration: config, logger: logger,
                             metricsText: { metrics.text(for: engine) })
        port = try server.start()
    }

    /// The proxy path (root-relative, with the token if any, else signed) for an origin path.
    func path(_ originPath: String, token: String? = nil) -> String {
        signed(origin.url(originPath), token: token)
    }

    /// The proxy path of any URL, as `httpcachefs url` makes it for this proxy.
    func signed(_ original: String, token: String? = nil) -> String {
        ProxyURL.make(original: original, base: "", token: token ?? configuration.token, key: configuration.signingKey)
    }

    /// A full proxy URL for players.
    func url(_ originPath: String) -> String { "http://127.0.0.1:\(port)" + path(originPath) }

    func get(_ target: String, _ headers: [(String, String)] = [], method: String = "GET") throws -> RawHTTP.Response {
        try RawHTTP.request(port: port, method: method, path: target, headers: headers, timeout: 20)
    }

    /// The control key as an owner's request carries it: the status page, `status.json` and
    /// `/metrics` need it (or the token).
    var ownerHeaders: [(String, String)] { [(ControlRequest.keyHeader, configuration.controlKey)] }

    /// A request for an owner-only page, with the control key.
    func owner(_ target: String, _ headers: [(String, String)] = []) throws -> RawHTTP.Response {
        try get(target, headers + ownerHeaders)
    }

    func shutdown() {
        server.stop()
        engine.shutdown()
        source.shutdown()
        origin.stop()
        directory.remove()
    }
}

/// Deterministic test bytes.
func testBytes(_ n: Int, seed: UInt64 = 1) -> [UInt8] {
    OriginServer.generatedBytes(seed: seed, offset: 0, count: n)
}
