import CacheCore
import Fetcher
import Foundation
import Glibc
import Logging
import TestSupport
import XCTest

/// The address policy inside libcurl, on loopback only: 127.0.0.2 stands in for a metadata
/// address (the policy is injected), 127.0.0.1 for an ordinary origin. Behind 127.0.0.2 sits a
/// bare listening socket that never accepts: any connection attempt would wait in its backlog,
/// so "nothing pending" proves no packet reached it.
final class CurlAddressPolicyTests: XCTestCase {
    var origin: OriginServer!
    var listener: BacklogListener!
    var source: CurlRangeSource!
    let data: [UInt8] = OriginServer.generatedBytes(seed: 5, offset: 0, count: 10_000)

    override func setUpWithError() throws {
        origin = try OriginServer(host: "127.0.0.1")
        origin.setFile("/f.bin", data: data)
        listener = try BacklogListener(host: "127.0.0.2")
        source = makeSource()
    }

    override func tearDown() {
        source?.shutdown()
        origin?.stop()
        listener?.close()
    }

    /// Forbids 127.0.0.2 and one metadata name; pins names to loopback so that no DNS is asked.
    func makeSource(pins: [String] = [], policy: (AddressPolicy) -> AddressPolicy = { $0 }) -> CurlRangeSource {
        let forbid = AddressPolicy(forbiddenRanges: [AddressRange("127.0.0.2/32")!], forbiddenNames: ["metadata.google.internal"])
        let c = FetcherConfiguration(clock: .realTime, userAgent: "httpcachefs-tests", connectTimeout: 5, lowSpeedTime: 10,
                                     maxRetries: 4, retryBaseDelay: 0.01, addressPolicy: policy(forbid),
                                     pinnedAddresses: ["pinned.test:\(listener.port):127.0.0.2",
                                                       "metadata.google.internal:\(origin.port):127.0.0.1"] + pins)
        return CurlRangeSource(configuration: c, logger: Logger(label: "address-policy-tests"))
    }

    func fetch(_ url: String, via source: CurlRangeSource? = nil) -> RecordingSink {
        let sink = RecordingSink()
        _ = (source ?? self.source).start(FetchRequest(url: url), sink: sink)
        wait(for: [sink.finished], timeout: 30)
        XCTAssertEqual(sink.violations, [])
        return sink
    }

    func assertRefused(_ sink: RecordingSink, mentioning text: String, file: StaticString = #filePath, line: UInt = #line) {
        guard case let .refusedAddress(_, reason)? = sink.result(file: file, line: line) else {
            return XCTFail("expected a refusal, got \(String(describing: sink.finishes))", file: file, line: line)
        }
        XCTAssertTrue(reason.contains(text), reason, file: file, line: line)
        XCTAssertEqual(sink.heads, [], "nothing reaches the sink", file: file, line: line)
    }

    func testAnOrdinaryAddressIsFetched() {
        let sink = fetch(origin.url("/f.bin"))
        XCTAssertNil(sink.result())
        XCTAssertEqual(sink.body, data)
    }

    func testAForbiddenAddressIsNeverConnectedTo() {
        assertRefused(fetch("http://127.0.0.2:\(listener.port)/f.bin"), mentioning: "127.0.0.2")
        XCTAssertEqual(listener.pendingConnections(), 0)
    }

    func testARedirectToAForbiddenAddressIsRefusedAndNotRetried() {
        origin.setFaults("/go", Faults(redirectTo: "http://127.0.0.2:\(listener.port)/f.bin"))
        assertRefused(fetch(origin.url("/go")), mentioning: "127.0.0.2")
        XCTAssertEqual(listener.pendingConnections(), 0)
        XCTAssertEqual(origin.requestCount(path: "/go"), 1, "a refusal is final: no retry")
    }

    func testANameThatResolvesToAForbiddenAddressIsRefused() {
        assertRefused(fetch("http://pinned.test:\(listener.port)/f.bin"), mentioning: "127.0.0.2")
        XCTAssertEqual(listener.pendingConnections(), 0)
    }

    func testAMetadataNameIsRefusedByNameAlsoAfterARedirect() {
        // Pinned to 127.0.0.1, an allowed address: only the name is wrong.
        assertRefused(fetch("http://metadata.google.internal:\(origin.port)/f.bin"), mentioning: "metadata.google.internal")
        origin.setFaults("/go", Faults(redirectTo: "http://metadata.google.internal:\(origin.port)/f.bin"))
        assertRefused(fetch(origin.url("/go")), mentioning: "metadata.google.internal")
        XCTAssertEqual(origin.requests.map(\.path), ["/go"], "the metadata name got no request")
    }

    func testAnExactAllowedHostOpensIt() throws {
        let forbiddenOrigin = try OriginServer(host: "127.0.0.2")
        defer { forbiddenOrigin.stop() }
        forbiddenOrigin.setFile("/f.bin", data: data)
        let byAddress = makeSource { $0.allowing(hosts: ["127.0.0.2"]) }
        defer { byAddress.shutdown() }
        XCTAssertNil(fetch(forbiddenOrigin.url("/f.bin"), via: byAddress).result())

        // A name opens what it resolves to, also when reached through a redirect; other names
        // still may not reach that address.
        let byName = makeSource(pins: ["nas.test:\(forbiddenOrigin.port):127.0.0.2"]) { $0.allowing(hosts: ["nas.test"]) }
        defer { byName.shutdown() }
        origin.setFaults("/go", Faults(redirectTo: "http://nas.test:\(forbiddenOrigin.port)/f.bin"))
        let redirected = fetch(origin.url("/go"), via: byName)
        XCTAssertNil(redirected.result())
        XCTAssertEqual(redirected.body, data)
        XCTAssertEqual(forbiddenOrigin.requestCount(path: "/f.bin"), 2)
        assertRefused(fetch(forbiddenOrigin.url("/f.bin"), via: byName), mentioning: "127.0.0.2")
        XCTAssertEqual(forbiddenOrigin.requestCount(path: "/f.bin"), 2)
    }
}

/// A TCP socket that listens and never accepts: connections pile up in its backlog, where
/// `pendingConnections()` counts them without blocking.
final class BacklogListener {
    let fd: Int32
    let port: Int

    init(host: String) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = 0
        inet_pton(AF_INET, host, &addr.sin_addr)
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            let cause = String(cString: strerror(errno))
            Glibc.close(fd)
            throw XCTSkip("cannot listen on \(host): \(cause)")
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &len) }
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        self.fd = fd
        port = Int(in_port_t(bigEndian: addr.sin_port))
    }

    /// Connections that reached this socket since the last call (accepted and closed here).
    func pendingConnections() -> Int {
        var n = 0
        while true {
            let c = accept(fd, nil, nil)
            if c < 0 { return n }
            Glibc.close(c)
            n += 1
        }
    }

    func close() { Glibc.close(fd) }
}
