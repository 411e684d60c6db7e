import FuzzSupport
@testable import Proxy

/// Request targets as a client sends them: the router (security rules, token, Host) and the
/// proxy URL decoder behind it. Invariants: whatever is proxied is an http(s) URL without control
/// characters, and a proxy URL made for it decodes back to it.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProxyURL(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let withToken = input.bool()
    let host = input.text(maxBytes: 64)
    let target = input.restText()
    let router = withToken ? tokenRouter : plainRouter
    let route = router.route(method: "GET", target: target, headerBytes: target.utf8.count, host: host)
    if case let .proxy(url) = route {
        fuzzCheck(!hasControlCharacter(url), "proxied a URL with a control character: \(url.debugDescription)")
        let lower = url.lowercased()
        fuzzCheck(lower.hasPrefix("http://") || lower.hasPrefix("https://"), "proxied a non-http URL: \(url.debugDescription)")
        let again = try? ProxyURL.decode(path: ProxyURL.make(original: url, base: "", token: nil))
        fuzzCheck(again?.url == url, "proxy URL of \(url.debugDescription) decodes to \(String(describing: again))")
    }
    _ = try? ProxyURL.decode(path: target)
    return 0
}

let plainRouter = ProxyRouter(configuration: ProxyConfiguration())
let tokenRouter: ProxyRouter = {
    var c = ProxyConfiguration()
    c.token = "s3cret"
    c.allowedHosts = ["*.example.com", "127.0.0.1:8080"]
    return ProxyRouter(configuration: c)
}()
