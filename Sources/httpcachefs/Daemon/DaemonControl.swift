import Foundation
import Proxy

/// Control requests to a running daemon's proxy (`POST /.httpcachefs/control/ACTION`), with the
/// control key from its owner-only runtime file: `refresh`, and `cache rm` / `cache clear`
/// while a daemon holds the cache; and the owner-only pages (`status.json`, the proxy's own
/// status) the CLI reads, which take the same key. Every exchange has a deadline
/// (`LoopbackGet`), and the key goes only to a port the daemon itself listens on.
enum DaemonControl {
    /// GET of an owner-only page (`path`, after any token prefix the caller added) of the proxy
    /// `status` describes, with its control key: the body of a 200 answer, or nil (no key, the
    /// port is not the daemon's, no answer within `timeout` seconds, more than `maxBytes`).
    static func ownerGet(_ path: String, from status: ProxyStatus, timeout: Int = 2,
                         maxBytes: Int = LoopbackGet.maxResponseBytes) -> [UInt8]? {
        guard let (code, body) = ownerRequest(path, from: status, timeout: timeout, maxBytes: maxBytes), code == 200 else { return nil }
        return body
    }

    /// `ownerGet`'s answer with its status (a caller that tells a refusal from no answer), or nil
    /// when nothing answers.
    static func ownerRequest(_ path: String, from status: ProxyStatus, timeout: Int = 2,
                             maxBytes: Int = LoopbackGet.maxResponseBytes) -> (status: Int, body: [UInt8])? {
        guard let key = status.controlKey else { return nil }
        if let pid = status.pid, ListenerOwner.listens(pid: pid, port: status.port) == false { return nil }
        return LoopbackGet.request("GET", host: status.localConnectHost, port: status.port, path: path,
                                   headers: [(ControlRequest.keyHeader, key)], timeout: timeout, maxBytes: maxBytes)
    }

    /// The status page's address for the owner: under the token when the proxy has one, else
    /// with the control key (`?key=`), as a notebook server's address carries its token.
    static func pageAddress(_ status: ProxyStatus) -> String {
        let page = status.localBase + status.tokenPath(ProxyRouter.pagePath)
        guard status.token == nil, let key = status.controlKey else { return page }
        return page + "?key=" + key
    }

    struct Answer {
        var status: Int
        var lines: [String]
    }

    /// Sends `action` with `query` to the proxy `status` describes (read from the runtime file).
    /// Blocking: call on a dedicated thread. `timeout` bounds each wait for the answer.
    static func send(_ action: String, query: [(String, String)] = [], to status: ProxyStatus,
                     timeout: Int = 180) throws -> Answer {
        guard let key = status.controlKey else {
            throw CommandFailure("the daemon (pid \(status.pid.map(String.init) ?? "?")) takes no control requests (an older version): restart it")
        }
        if let pid = status.pid, ListenerOwner.listens(pid: pid, port: status.port) == false {
            throw CommandFailure("port \(status.port), which the daemon's \(ProxyStatus.runtimeFileName) names, is not the daemon's (pid \(pid)): another program listens there; its control key was not sent. Restart the daemon")
        }
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~/")
        let q = query.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }.joined(separator: "&")
        let path = status.tokenPath(ControlRequest.pathPrefix + action) + (q.isEmpty ? "" : "?" + q)
        guard let (code, body) = LoopbackGet.request("POST", host: status.localConnectHost, port: status.port, path: path,
                                                     headers: [(ControlRequest.keyHeader, key)], timeout: timeout) else {
            throw CommandFailure("the daemon's proxy (pid \(status.pid.map(String.init) ?? "?"), port \(status.port)) does not answer")
        }
        let lines = String(decoding: body, as: UTF8.self).split(separator: "\n").map(String.init)
        return Answer(status: code, lines: lines)
    }
}
