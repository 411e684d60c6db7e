import FuzzSupport
@testable import Proxy

/// Request targets as a client sends them: the router (security rules, token, signature, Host)
/// and the proxy URL decoder behind it. Invariants: whatever is proxied is an http(s) URL without
/// control characters, and without a token it carried this proxy's valid signature; a proxy URL
/// made for it decodes back to it, signed; and no decoder accepts a signature made for another
/// URL, cut or changed by a byte.
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
        if !withToken {
            let signed = (try? ProxyURL.decode(path: target))?.isSigned(by: key) ?? false
            fuzzCheck(signed, "proxied \(target.debugDescription) without a valid signature")
        }
        let made = ProxyURL.make(original: url, base: "", token: nil, key: key)
        let again = try? ProxyURL.decode(path: made)
        fuzzCheck(again?.url == url, "proxy URL of \(url.debugDescription) decodes to \(String(describing: again))")
        fuzzCheck(again?.isSigned(by: key) == true, "the signed proxy URL of \(url.debugDescription) does not verify")
        if made.utf8.count <= ProxyConfiguration().maxRequestTargetBytes {
            fuzzCheck(plainRouter.route(method: "GET", target: made, headerBytes: 0) == .proxy(url: url),
                      "the router refuses the signed proxy URL of \(url.debugDescription)")
        }
        checkForgeries(of: url)
    }
    if let decoded = try? ProxyURL.decode(path: target) {
        // The fuzzed text as an original: its signature holds only for itself.
        checkForgeries(of: decoded.url)
    }
    return 0
}

/// A signature verifies for its own URL only: not for a neighbour, not with a byte flipped, not cut.
func checkForgeries(of url: String) {
    let signature = key.signature(for: url)
    fuzzCheck(key.verifies(signature: signature, for: url), "the signature of \(url.debugDescription) does not verify")
    fuzzCheck(!key.verifies(signature: signature, for: url + "x"), "a signature verified for another URL")
    fuzzCheck(!key.verifies(signature: String(signature.dropLast()), for: url), "a cut signature verified")
    var bytes = Array(signature.utf8)
    bytes[bytes.count / 2] = bytes[bytes.count / 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
    fuzzCheck(!key.verifies(signature: String(decoding: bytes, as: UTF8.self), for: url), "a changed signature verified")
    fuzzCheck(!otherKey.verifies(signature: signature, for: url), "another daemon's key verified a signature")
}

let key = ProxySigningKey(bytes: [UInt8](repeating: 0x42, count: 32))!
let otherKey = ProxySigningKey(bytes: [UInt8](repeating: 0x43, count: 32))!
let plainRouter: ProxyRouter = {
    var c = ProxyConfiguration()
    c.signingKey = key
    return ProxyRouter(configuration: c)
}()
let tokenRouter: ProxyRouter = {
    var c = ProxyConfiguration()
    c.token = "s3cret"
    c.signingKey = key
    c.allowedHosts = ["*.example.com", "127.0.0.1:8080"]
    return ProxyRouter(configuration: c)
}()
