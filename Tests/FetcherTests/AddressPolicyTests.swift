import Fetcher
import Foundation
import Glibc
import XCTest

/// The default classifier, fed socket addresses as libcurl's open-socket callback sees them.
/// No connection is made: these are values only.
final class AddressPolicyTests: XCTestCase {
    let policy = AddressPolicy.standard

    /// The policy's verdict for a socket address built from `text` (AF_INET or AF_INET6).
    func refusal(_ text: String, host: String? = nil, policy: AddressPolicy? = nil) -> String? {
        (policy ?? self.policy).refusal(connectingTo: socketAddress(text), host: host)
    }

    func socketAddress(_ text: String) -> IPAddress? {
        if text.contains(":") {
            var sa = sockaddr_in6()
            sa.sin6_family = sa_family_t(AF_INET6)
            sa.sin6_port = in_port_t(80).bigEndian
            guard inet_pton(AF_INET6, text, &sa.sin6_addr) == 1 else { return nil }
            return withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { IPAddress($0) } }
        }
        var sa = sockaddr_in()
        sa.sin_family = sa_family_t(AF_INET)
        sa.sin_port = in_port_t(80).bigEndian
        guard inet_pton(AF_INET, text, &sa.sin_addr) == 1 else { return nil }
        return withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { IPAddress($0) } }
    }

    func testMetadataAndLinkLocalAddressesAreRefused() {
        for address in [
            "169.254.169.254", "169.254.170.2", "169.254.0.1", "169.254.255.255",  // IPv4 link-local, IMDS, ECS
            "100.100.100.200",                                                    // Alibaba Cloud
            "fe80::1", "fe80::a9fe:a9fe", "febf:ffff::1",                          // fe80::/10
            "fd00:ec2::254",                                                      // AWS IMDS over IPv6
            "::ffff:169.254.169.254", "::ffff:100.100.100.200",                    // IPv4-mapped
            "64:ff9b::a9fe:a9fe",                                                 // NAT64 of 169.254.169.254
        ] {
            XCTAssertNotNil(socketAddress(address), address)
            XCTAssertNotNil(refusal(address), "\(address) must be refused")
        }
    }

    func testOrdinaryAndPrivateAddressesAreAllowed() {
        for address in [
            "127.0.0.1", "::1", "93.184.216.34", "2606:2800:220:1::1",
            "10.0.0.5", "172.16.0.1", "172.31.255.255", "192.168.1.20",           // a NAS is a normal origin
            "fd00::1", "fd00:ec2::253", "fc00::1",                                 // fc00::/7 other than the IMDS
            "169.253.255.255", "169.255.0.1", "100.100.100.201", "fec0::1", "::ffff:192.168.1.20",
        ] {
            XCTAssertNotNil(socketAddress(address), address)
            XCTAssertNil(refusal(address), "\(address) must be allowed")
        }
    }

    func testMetadataNamesAreRefusedWhateverTheyResolveTo() {
        for name in ["metadata.google.internal", "METADATA.Google.Internal.", "metadata.goog", "metadata"] {
            XCTAssertNotNil(refusal("127.0.0.1", host: name), name)
            XCTAssertNotNil(policy.refusal(url: "http://\(name)/computeMetadata/v1/"), name)
        }
        // Read as curl reads URLs, also those Foundation would not parse.
        XCTAssertNotNil(policy.refusal(url: "HTTP://Metadata.Google.Internal./{v1}|x"))
        XCTAssertNotNil(policy.refusal(url: "http://user:pw@metadata.goog:80/"))
        XCTAssertNil(policy.refusal(url: "http://metadata.example.com/x"))
        XCTAssertNil(policy.refusal(url: "https://cdn.example.com/movie.mp4"))
    }

    func testAddressLiteralsInURLsInEverySpelling() {
        for url in ["http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://[::ffff:169.254.169.254]/",
                    "http://[fd00:ec2::254]/", "http://2852039166/", "http://0xa9.254.169.254/", "http://169.254.43518/",
                    "http://100.100.100.200/"] {
            XCTAssertNotNil(policy.refusal(url: url), url)
        }
        XCTAssertNil(policy.refusal(url: "http://192.168.1.20:8080/a.mp4"))
        XCTAssertNil(policy.refusal(url: "http://[fd12::1]/a.mp4"))
    }

    func testAnExactAllowedHostOpensItAndNothingElse() {
        let opened = policy.allowing(hosts: ["169.254.169.254", "fd00:ec2::254", "metadata.google.internal"])
        XCTAssertNil(refusal("169.254.169.254", policy: opened))
        XCTAssertNil(refusal("::ffff:169.254.169.254", policy: opened))
        XCTAssertNil(refusal("fd00:ec2::254", policy: opened))
        XCTAssertNotNil(refusal("169.254.169.253", policy: opened), "only the address named")
        // A name opens whatever it resolves to; other names still may not reach that address.
        XCTAssertNil(refusal("169.254.169.254", host: "metadata.google.internal", policy: opened))
        XCTAssertNil(refusal("169.254.1.1", host: "metadata.google.internal", policy: opened))
        XCTAssertNotNil(refusal("169.254.1.1", host: "evil.example", policy: opened))
        XCTAssertNotNil(refusal("127.0.0.1", host: "metadata.goog", policy: opened))
    }

    func testRangesParseAndPrint() throws {
        XCTAssertEqual(AddressRange("169.254.0.0/16")?.description, "169.254.0.0/16")
        XCTAssertEqual(AddressRange("fe80::/10")?.description, "fe80::/10")
        XCTAssertEqual(AddressRange("127.0.0.2")?.description, "127.0.0.2/32")
        XCTAssertNil(AddressRange("169.254.0.0/33"))
        XCTAssertNil(AddressRange("fe80::/129"))
        XCTAssertNil(AddressRange("metadata/8"))
        let range = try XCTUnwrap(AddressRange("127.0.0.2/32"))
        XCTAssertTrue(range.contains(try XCTUnwrap(IPAddress("::ffff:127.0.0.2"))))
        XCTAssertFalse(range.contains(try XCTUnwrap(IPAddress("127.0.0.1"))))
    }

    func testTheReasonSaysWhatAndHowToOpenIt() throws {
        let reason = try XCTUnwrap(refusal("169.254.169.254"))
        XCTAssertTrue(reason.contains("169.254.169.254"), reason)
        XCTAssertTrue(reason.contains("169.254.0.0/16"), reason)
        XCTAssertTrue(reason.contains("--allow-host 169.254.169.254"), reason)
        XCTAssertTrue(try XCTUnwrap(refusal("fe80::1")).contains("--allow-host [fe80::1]"))
    }

    func testAHostIsReadAsAnAddressOnlyWhenItIsOneInEveryEncoding() {
        let metadata = IPAddress("169.254.169.254")
        XCTAssertNotNil(metadata)
        for host in ["169.254.169.254", "0xa9.254.169.254", "2852039166", "0251.0376.0251.0376", "[::ffff:169.254.169.254]"] {
            XCTAssertEqual(IPAddress(urlHost: host), metadata, host)
        }
        XCTAssertEqual(IPAddress(urlHost: "[fe80::1%eth0]"), IPAddress("fe80::1"))
        XCTAssertNil(IPAddress("0xa9.254.169.254"), "strict form: no hex parts")
        for host in ["", "[", "[]", "example.com", "169.254.169.254\u{301}", "\u{FF11}69.254.169.254", "1.2.3.4 ", "::g"] {
            XCTAssertNil(IPAddress(urlHost: host), host.debugDescription)
        }
    }
}
