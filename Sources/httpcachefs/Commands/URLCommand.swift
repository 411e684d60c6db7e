import ArgumentParser
import CacheCore
import Foundation
import Proxy
#if canImport(Glibc)
import Glibc
#endif

/// `httpcachefs url URL`: prints the proxy URL that serves `URL` from the cache.
///
/// The proxy is the one of the daemon that holds the cache directory: its `<cache dir>/proxy.json`
/// (written by the proxy while it runs) counts only if the pid in it is the process holding
/// `<cache dir>/lock`, and the proxy must confirm with `GET /.httpcachefs/status` that it serves
/// that directory. A stale file or another daemon's proxy on the same port is never taken: a URL
/// on it would serve from another cache, or from nothing.
struct URLCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "url",
        abstract: "Print the local proxy URL of a remote file or HLS playlist.",
        discussion: """
            Asks the proxy of the daemon ('httpcachefs mount' or 'httpcachefs proxy') that holds \
            the cache directory for its port and token (without --cache-dir: the one daemon of yours that runs). URL may also be a file inside a mount. With --proxy-port, that port is used even if no \
            proxy answers right now (a warning says so). The URL ends with the original's file \
            name, so players that look at the extension (.mp4, .m3u8) still work. It carries a \
            signature made with the cache's key (<cache dir>/proxy-key, readable by its owner \
            only), or the token: the proxy serves no URL without one.
            """
    )

    @Argument(help: "The original http(s) URL, or a file inside a mount.")
    var url: String

    @Option(name: [.customLong("proxy-port"), .customLong("port")],
            help: ArgumentHelp("Port of the proxy, instead of asking the running one (--port is the older name).", valueName: "port"))
    var port: Int?

    @Option(help: ArgumentHelp("Host of the proxy in the printed URL (default: 127.0.0.1, or what the proxy reports).", valueName: "host"))
    var host: String?

    @Option(help: ArgumentHelp("Token to put into the URL (default: the running proxy's, if it has one).", valueName: "token"))
    var token: String?

    @OptionGroup var cache: CacheOptions

    /// A path inside a mount becomes the URL shown there (its daemon's cache then counts); a URL
    /// takes its one spelling; without --cache-dir, the one running daemon's cache is used.
    mutating func validate() throws {
        do {
            if let found = try MountPathURL.resolve(url, daemons: DaemonDiscovery.mine()) {
                url = found.url
                if cache.cacheDirectory == nil { cache.cacheDirectory = found.daemon.cacheDirectory }
            }
        } catch { throw ErrorReporting.report(error) }
        url = try URLArgument.normalize(url)
        if let port {
            // The port names the daemon: its cache, when none is named (no warning about another).
            if cache.cacheDirectory == nil, let daemon = DaemonDiscovery.mine().first(where: { $0.proxy?.port == port }) {
                cache.cacheDirectory = daemon.cacheDirectory
            }
        } else {
            try cache.useTheRunningDaemonsCache(command: "url")
        }
    }

    func run() async throws {
        try await runReportingErrors {
            let directory = try cache.resolve().directory
            let (port, host, token) = (self.port, self.host, self.token)
            // Another user's proxy.json and signing key are never read (`OwnedFile`): without
            // this its running daemon would be reported as one that runs no proxy.
            var st = stat()
            if port == nil, stat(directory, &st) == 0, st.st_uid != geteuid() {
                throw CommandFailure("the cache \(directory) is uid \(st.st_uid)'s, not yours (uid \(geteuid())): its proxy URLs are signed with that user's key, which only that user can read; run 'httpcachefs url' as that user")
            }
            let lookup = try await onBlockingPool {
                port.map { Self.askPort($0) } ?? Self.findProxy(cacheDirectory: directory)
            }
            let base: String
            var urlToken = token
            switch lookup {
            case let .found(found):
                if port != nil, let served = found.cacheDirectory, !Self.sameDirectory(served, directory) {
                    ErrorReporting.printWarning("the proxy on port \(found.port) serves the cache \(served), not \(directory)")
                }
                let p = port ?? found.port
                base = host.map { "http://\(Self.bracketed($0)):\(p)" } ?? ProxyConfiguration.localBase(bindAddress: found.bindAddress, port: p)
                if urlToken == nil { urlToken = found.token }
                if found.tokenRequired && urlToken == nil {
                    ErrorReporting.printWarning("the proxy requires a token it did not disclose; pass --token")
                }
            case .notFound where port != nil:
                ErrorReporting.printWarning("no httpcachefs proxy answers on port \(port!) right now")
                base = "http://\(Self.bracketed(host ?? "127.0.0.1")):\(port!)"
            case let .notFound(why):
                // A mount started with its own --cache-dir is the usual reason: name it.
                let other = try await onBlockingPool { Self.askPort(ProxyConfiguration.defaultPort) }
                if case let .found(status) = other, let served = status.cacheDirectory, !Self.sameDirectory(served, directory) {
                    throw CommandFailure("no httpcachefs proxy serves the cache \(directory): \(why); the proxy on port \(status.port) serves the cache \(served): pass --cache-dir \(served)")
                }
                throw CommandFailure("no httpcachefs proxy serves the cache \(directory): \(why); start 'httpcachefs mount' or 'httpcachefs proxy' with --cache-dir \(directory), or pass --proxy-port")
            }
            // The signature: proof for the proxy that its owner made this URL.
            let key = ProxySigningKey.read(cacheDirectory: directory)
            if urlToken == nil && key == nil {
                ErrorReporting.printWarning("the cache's signing key \(ProxySigningKey.filePath(cacheDirectory: directory)) cannot be read (another user's cache, or no daemon ever ran on it): the proxy refuses this URL unsigned (403)")
            }
            CacheCommand.printLine(ProxyURL.make(original: url, base: base, token: urlToken, key: key))
        }
    }

    private static func bracketed(_ host: String) -> String {
        host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
    }

    enum Lookup {
        case found(ProxyStatus)
        /// Why not, for the error message.
        case notFound(String)
    }

    /// Whatever httpcachefs proxy answers on `port` (the user named it).
    static func askPort(_ port: Int) -> Lookup {
        // A daemon of this user on that port is asked with its key: then it names its cache.
        let mine = DaemonDiscovery.mine().compactMap(\.proxy).first { $0.port == port }
        guard let body = mine.flatMap({ DaemonControl.ownerGet(statusPath, from: $0) })
                ?? LoopbackGet.get(host: "127.0.0.1", port: port, path: statusPath),
              let status = ProxyStatus.decode(body) else { return .notFound("nothing answers on port \(port)") }
        return .found(status)
    }

    static let statusPath = "/.httpcachefs/status"

    /// The proxy of the process holding `cacheDirectory`, or why there is none.
    /// Blocking (short socket timeouts): run it on a dedicated thread.
    static func findProxy(cacheDirectory: String) -> Lookup {
        let holder = CacheLockHolder.holder(ofCacheDirectory: cacheDirectory)
        if holder == .free { return .notFound("no daemon holds it") }
        guard let file = ProxyStatus.readRuntimeFile(cacheDirectory: cacheDirectory), let pid = file.pid else {
            return .notFound(holderText(holder) + " runs no proxy (started with --no-proxy, or not a daemon)")
        }
        switch holder {
        case let .held(by: owner) where owner != pid:
            return .notFound(holderText(holder) + " runs no proxy (\(ProxyStatus.runtimeFileName) is left from process \(pid))")
        case .unknown where kill(pid, 0) != 0 && errno == ESRCH:
            return .notFound("process \(pid) of its \(ProxyStatus.runtimeFileName) is gone")
        default:
            break
        }
        // The proxy discloses its token only to a request that carries it, and the cache
        // directory only to one with the control key.
        guard let body = DaemonControl.ownerGet(file.tokenPath(statusPath), from: file),
              let status = ProxyStatus.decode(body) else {
            return .notFound("the proxy of process \(pid) does not answer on port \(file.port)")
        }
        // Belt and braces: whoever answers there must serve this very directory.
        if let served = status.cacheDirectory, !sameDirectory(served, cacheDirectory) {
            return .notFound("port \(file.port) is served by a proxy for the cache \(served)")
        }
        return .found(status)
    }

    private static func holderText(_ holder: CacheLockHolder.Answer) -> String {
        if case let .held(by: pid) = holder { return "process \(pid), which holds it," }
        return "the process holding it"
    }

    /// Same directory, however written: compared by device and inode.
    static func sameDirectory(_ a: String, _ b: String) -> Bool {
        var sa = stat(), sb = stat()
        guard stat(a, &sa) == 0, stat(b, &sb) == 0 else { return a == b }
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino
    }
}

/// A minimal blocking HTTP/1.0 GET for the local status endpoints: no proxy settings from the
/// environment can get in the way, and a dead port fails within a second or two.
///
/// `timeout` is a deadline for the whole exchange, not for each read: whoever listens on the
/// port (any local user can make a process look like a daemon) could otherwise hold a command,
/// root's `status` among them, for ever by sending one byte at a time.
enum LoopbackGet {
    /// The largest answer read: a status document lists every file of the cache (an HLS stream
    /// alone is a file per segment), so a few MiB are ordinary; a bound still keeps a stranger on
    /// the port from filling memory.
    static let maxResponseBytes = 256 << 20

    static func get(host: String, port: Int, path: String, headers: [(String, String)] = [], timeout: Int = 2,
                    maxBytes: Int = maxResponseBytes) -> [UInt8]? {
        guard let (status, body) = request("GET", host: host, port: port, path: path, headers: headers, timeout: timeout,
                                           maxBytes: maxBytes), status == 200 else { return nil }
        return body
    }

    /// One HTTP/1.0 request without a body; the status and body, or nil when nothing answers, the
    /// answer is longer than `maxBytes`, or it is not complete within `timeout` seconds.
    static func request(_ method: String, host: String, port: Int, path: String, headers: [(String, String)] = [],
                        timeout: Int, maxBytes: Int = maxResponseBytes) -> (status: Int, body: [UInt8])? {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(timeout, 1)) * 1_000_000_000
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
        // An IPv6 address goes in brackets: the proxy refuses a Host it cannot read as one.
        let hostHeader = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]:\(port)" : "\(host):\(port)"
        let extra = headers.map { "\($0.0): \($0.1)\r\n" }.joined() + (method == "POST" ? "Content-Length: 0\r\n" : "")
        let request = Array("\(method) \(path) HTTP/1.0\r\nHost: \(hostHeader)\r\n\(extra)\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else { return nil }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else { return nil }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&p, 1, Int32(min((deadline - now) / 1_000_000 + 1, UInt64(Int32.max))))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return nil }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            if n <= 0 { break }
            response += buffer[0..<n]
            // Head and body together: a bound on what is kept, not on the document alone.
            guard response.count <= maxBytes + (64 << 10) else { return nil }
        }
        guard let headEnd = response.firstRange(of: [13, 10, 13, 10]) else { return nil }
        let statusLine = String(decoding: response[..<headEnd.lowerBound], as: UTF8.self).split(separator: " ", maxSplits: 2)
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), let status = Int(statusLine[1]) else { return nil }
        return (status, Array(response[headEnd.upperBound...]))
    }
}
