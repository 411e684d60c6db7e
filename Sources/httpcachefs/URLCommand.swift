import ArgumentParser
import CacheCore
import Foundation
import Proxy
#if canImport(Glibc)
import Glibc
#endif

/// `httpcachefs url URL`: prints the proxy URL that serves `URL` from the cache.
///
/// The running proxy is found through `<cache dir>/proxy.json` (written by the proxy while it
/// runs), else on the default port, and confirmed with `GET /.httpcachefs/status`, whose answer
/// gives the port and, to a request carrying it (from the owner-only runtime file), the token.
struct URLCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "url",
        abstract: "Print the local proxy URL of a remote file or HLS playlist.",
        discussion: """
            Asks the running proxy (of 'httpcachefs mount' or 'httpcachefs proxy' on the same cache \
            directory) for its port and token. With --port, that port is used even if no proxy \
            answers right now (a warning says so). The URL ends with the original's file name, so \
            players that look at the extension (.mp4, .m3u8) still work.
            """
    )

    @Argument(help: "The original http(s) URL.")
    var url: String

    @Option(help: ArgumentHelp("Port of the proxy, instead of asking the running one.", valueName: "port"))
    var port: Int?

    @Option(help: ArgumentHelp("Host of the proxy in the printed URL (default: 127.0.0.1, or what the proxy reports).", valueName: "host"))
    var host: String?

    @Option(help: ArgumentHelp("Token to put into the URL (default: the running proxy's, if it has one).", valueName: "token"))
    var token: String?

    @OptionGroup var cache: CacheOptions

    func run() async throws {
        try await runReportingErrors {
            _ = try KeyRules.validate(url)
            let directory = try cache.resolve().directory
            let (port, host, token) = (self.port, self.host, self.token)
            let found = try await onDedicatedThread(name: "httpcachefs-url") {
                Self.findProxy(cacheDirectory: directory, port: port)
            }
            let base: String
            var urlToken = token
            if let found {
                let p = port ?? found.port
                base = host.map { "http://\(Self.bracketed($0)):\(p)" } ?? ProxyConfiguration.localBase(bindAddress: found.bindAddress, port: p)
                if urlToken == nil { urlToken = found.token }
                if found.tokenRequired && urlToken == nil {
                    ErrorReporting.printWarning("the proxy requires a token it did not disclose; pass --token")
                }
            } else if let port {
                ErrorReporting.printWarning("no httpcachefs proxy answers on port \(port) right now")
                base = "http://\(Self.bracketed(host ?? "127.0.0.1")):\(port)"
            } else {
                throw CommandFailure("no httpcachefs proxy is running for \(directory) (tried its proxy.json and port \(ProxyConfiguration.defaultPort)): start 'httpcachefs mount' or 'httpcachefs proxy', or pass --port")
            }
            CacheCommand.printLine(ProxyURL.make(original: url, base: base, token: urlToken))
        }
    }

    private static func bracketed(_ host: String) -> String {
        host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
    }

    /// The first candidate that answers the status request as an httpcachefs proxy.
    /// Blocking (short socket timeouts): run it on a dedicated thread.
    static func findProxy(cacheDirectory: String, port: Int?) -> ProxyStatus? {
        var candidates: [(host: String, port: Int, path: String)] = []
        let statusPath = "/.httpcachefs/status"
        if let port {
            candidates.append(("127.0.0.1", port, statusPath))
        } else {
            if let file = ProxyStatus.readRuntimeFile(cacheDirectory: cacheDirectory) {
                let host = ProxyConfiguration.isLoopback(file.bindAddress) ? file.bindAddress
                    : (file.bindAddress == "::" ? "::1" : "127.0.0.1")
                // The proxy discloses its token only to a request that carries it.
                let path = file.token.map { "/t/\($0)" + statusPath } ?? statusPath
                candidates.append((host == "localhost" ? "127.0.0.1" : host, file.port, path))
            }
            candidates.append(("127.0.0.1", ProxyConfiguration.defaultPort, statusPath))
        }
        for c in candidates {
            if let body = LoopbackGet.get(host: c.host, port: c.port, path: c.path),
               let status = ProxyStatus.decode(body) {
                return status
            }
        }
        return nil
    }
}

/// A minimal blocking HTTP/1.0 GET for the local status endpoint: no proxy settings from the
/// environment can get in the way, and a dead port fails within a second or two.
enum LoopbackGet {
    static func get(host: String, port: Int, path: String, timeout: Int = 2) -> [UInt8]? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICHOST
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let ai = list else { return nil }
        defer { freeaddrinfo(list) }
        let fd = socket(ai.pointee.ai_family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var tv = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, ai.pointee.ai_addr, ai.pointee.ai_addrlen) == 0 else { return nil }
        let request = Array("GET \(path) HTTP/1.0\r\nHost: \(host)\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else { return nil }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while response.count < 1 << 20 {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            response += buffer[0..<n]
        }
        guard let headEnd = response.firstRange(of: [13, 10, 13, 10]),
              String(decoding: response[..<headEnd.lowerBound], as: UTF8.self).hasPrefix("HTTP/1.1 200")
                || String(decoding: response[..<headEnd.lowerBound], as: UTF8.self).hasPrefix("HTTP/1.0 200") else { return nil }
        return Array(response[headEnd.upperBound...])
    }
}
