import FuzzSupport
@testable import Proxy

/// Host headers as a browser, or a page on a rebinding domain, sends them: the check that decides
/// whether a request is addressed to this machine. Invariants: a Host it accepts names loopback
/// by address, `localhost` or a name under it, the bind address or a configured name, never
/// anything else; a port it accepts is the proxy's; case never changes the answer.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHostHeader(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let header = input.restText()
    let accepted = check.accepts(header, port: port)
    let upper = String(decoding: header.utf8.map { (0x61...0x7A).contains($0) ? $0 - 0x20 : $0 }, as: UTF8.self)
    fuzzCheck(accepted == check.accepts(upper, port: port), "case changed the answer for \(header.debugDescription)")
    guard accepted, !header.isEmpty else { return 0 }
    guard let (host, given) = HostHeaderCheck.split(HostHeaderCheck.asciiLowercased(header)) else {
        fuzzCheck(false, "accepted a Host it cannot split: \(header.debugDescription)")
        return 0
    }
    fuzzCheck(given == nil || given == port, "accepted another port: \(header.debugDescription)")
    if let address = IPLiteral(host) {
        fuzzCheck(address.isLoopback || address == IPLiteral("10.0.0.7"), "accepted a foreign address: \(header.debugDescription)")
    } else {
        let name = host.hasSuffix(".") ? String(host.dropLast()) : host
        fuzzCheck(name == "localhost" || name.hasSuffix(".localhost") || name == "media.box",
                  "accepted a foreign name: \(header.debugDescription)")
        fuzzCheck(name.utf8.allSatisfy { $0 < 0x80 && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "@") },
                  "accepted a name that is no host name: \(header.debugDescription)")
    }
    return 0
}

let port = 8718
/// The machine's host name is left out (empty) so that the invariants above are exact.
let check = HostHeaderCheck(bindAddress: "10.0.0.7", hostName: "", extraNames: ["media.box"])
