import CacheCore
import Foundation

/// One `--tier ORIGIN=NODE[,NODE...][,slice=SIZE]`: the origin whose misses go to a cache tier,
/// the tier's nodes, and the slice size the nodes cache in (nginx `slice`, 4 MiB by default as
/// in `mount-helpers/tier.sh`).
///
/// The origin is a scheme, host, port and an optional path prefix; a URL is under it when all
/// four match (the prefix on a `/` boundary). Nodes are `http://host:port` (or `host:port`):
/// the daemon talks plain HTTP to its tier on the local network; the node talks TLS to the origin.
public struct TierSpec: Sendable, Equatable {
    public var scheme: String
    public var host: String
    public var port: Int
    /// "" or "/media": URLs whose path starts with it (on a `/` boundary).
    public var pathPrefix: String
    /// Node base URLs, `http://host:port`, in the order given (routing does not depend on it).
    public var nodes: [String]
    public var sliceSize: Int64

    public static let defaultSliceSize: Int64 = 4 << 20

    public init(scheme: String, host: String, port: Int, pathPrefix: String = "", nodes: [String],
                sliceSize: Int64 = TierSpec.defaultSliceSize) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.pathPrefix = pathPrefix
        self.nodes = nodes
        self.sliceSize = sliceSize
    }

    /// Why a `--tier` value was refused.
    public struct ParseError: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    /// Parses `ORIGIN=NODE[,NODE...][,slice=SIZE]`; SIZE as `4M`, `1M`, `512K` or bytes.
    public static func parse(_ text: String) throws(ParseError) -> TierSpec {
        func fail(_ why: String) -> ParseError {
            ParseError(description: "invalid tier '\(text)': \(why) (expected ORIGIN=NODE[,NODE...][,slice=SIZE], e.g. https://media.example.com=http://10.0.0.5:8080,http://10.0.0.6:8080)")
        }
        guard let eq = text.firstIndex(of: "=") else { throw fail("no '=' between the origin and the nodes") }
        let originText = text[..<eq].trimmingCharacters(in: .whitespaces)
        guard let origin = URLComponents(string: originText), let scheme = origin.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = origin.host?.lowercased(), !host.isEmpty else {
            throw fail("the origin '\(originText)' is not an http or https URL")
        }
        guard origin.query == nil, origin.fragment == nil, origin.user == nil else {
            throw fail("the origin '\(originText)' may carry a path prefix but no query, fragment or user")
        }
        guard origin.port.map({ (1...65535).contains($0) }) ?? true else {
            throw fail("the origin '\(originText)' has no valid port (1-65535)")
        }
        var prefix = origin.percentEncodedPath
        while prefix.hasSuffix("/") { prefix.removeLast() }
        var nodes: [String] = []
        var slice = defaultSliceSize
        for item in text[text.index(after: eq)...].split(separator: ",") {
            let word = item.trimmingCharacters(in: .whitespaces)
            if word.isEmpty { continue }
            if word.lowercased().hasPrefix("slice=") {
                guard let size = Self.parseSize(String(word.dropFirst(6))), size >= 64 << 10, size <= 1 << 30 else {
                    throw fail("slice size '\(word.dropFirst(6))' is not a size from 64K to 1G")
                }
                slice = size
                continue
            }
            let withScheme = word.contains("://") ? word : "http://" + word
            guard let node = URLComponents(string: withScheme), let nodeScheme = node.scheme?.lowercased(),
                  nodeScheme == "http" || nodeScheme == "https", let nodeHost = node.host, !nodeHost.isEmpty,
                  node.path.isEmpty || node.path == "/", node.query == nil else {
                throw fail("the node '\(word)' is not a base URL like http://10.0.0.5:8080")
            }
            // A node's user or fragment was dropped without a word (no credentials are ever sent
            // to a node: it forwards the daemon's to its origin), and a port past 65535 made
            // every request to the node fail: said here instead.
            guard node.user == nil, node.password == nil, node.fragment == nil,
                  node.port.map({ (1...65535).contains($0) }) ?? true else {
                throw fail("the node '\(word)' is not a base URL like http://10.0.0.5:8080 (no user, fragment, or port past 65535)")
            }
            let hostPart = nodeHost.contains(":") && !nodeHost.hasPrefix("[") ? "[\(nodeHost)]" : nodeHost
            nodes.append("\(nodeScheme)://\(hostPart)\(node.port.map { ":\($0)" } ?? "")")
        }
        guard !nodes.isEmpty else { throw fail("no tier node") }
        guard Set(nodes).count == nodes.count else { throw fail("a node is named twice") }
        return TierSpec(scheme: scheme, host: host, port: origin.port ?? (scheme == "https" ? 443 : 80),
                        pathPrefix: prefix, nodes: nodes, sliceSize: slice)
    }

    /// `parseSize` for tools (the benchmark); 4 MiB when unreadable.
    public static func parseSizeForBench(_ text: String) -> Int64 { parseSize(text) ?? defaultSliceSize }

    /// `4M`, `512K`, `1G`, or a byte count.
    static func parseSize(_ text: String) -> Int64? {
        var t = text.trimmingCharacters(in: .whitespaces).uppercased()
        if t.hasSuffix("IB") { t.removeLast(2) } else if t.hasSuffix("B") { t.removeLast() }
        var shift: Int64 = 0
        switch t.last {
        case "K": shift = 10
        case "M": shift = 20
        case "G": shift = 30
        default: break
        }
        if shift > 0 { t.removeLast() }
        guard let n = Int64(t), n > 0, n < (1 << 40) else { return nil }
        return n << shift
    }

    /// Whether `url` is under this origin (scheme, host, port and path prefix).
    public func covers(_ url: String) -> Bool {
        guard let p = Self.parts(of: url), p.scheme == scheme, p.host == host, p.port == port else { return false }
        guard !pathPrefix.isEmpty else { return true }
        return p.path == pathPrefix || p.path.hasPrefix(pathPrefix + "/")
    }

    /// What `covers` compares of a URL: scheme and host lower-cased, the port filled in.
    struct URLParts: Sendable {
        let scheme: String, host: String, port: Int, path: String
    }

    /// Asked for every fetch, of the same few URLs: parsed once each (`URLComponents` with its
    /// IDNA host showed in a proxied miss's profile). Nil if the URL does not parse.
    static func parts(of url: String) -> URLParts? {
        recentParts.value(for: url) { url in
            guard let c = URLComponents(string: url), let scheme = c.scheme?.lowercased(),
                  let host = c.host?.lowercased() else { return nil }
            return URLParts(scheme: scheme, host: host, port: c.port ?? (scheme == "https" ? 443 : 80),
                            path: c.percentEncodedPath)
        }
    }

    private static let recentParts = RecentResults<URLParts?>()

    /// What a node is asked for `url`, after the node's base: the origin URL's path ("/" if it
    /// has none) and query (the node forwards both to its one origin, the query's rotating
    /// tokens included).
    static func nodePath(for url: String) -> String? {
        recentNodePaths.value(for: url) { url in
            guard let c = URLComponents(string: url) else { return nil }
            var path = c.percentEncodedPath
            if path.isEmpty { path = "/" }
            return path + (c.percentEncodedQuery.map { "?" + $0 } ?? "")
        }
    }

    /// Each tier transfer asks this of its URL, and a player's transfers share one.
    private static let recentNodePaths = RecentResults<String?>()
}
