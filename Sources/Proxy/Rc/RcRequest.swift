import Foundation

/// One request to rclone's remote control, parsed: the call (`vfs/refresh`) and its parameters.
///
/// rclone's rc is `POST /<call>` with the parameters as URL query, as a form body
/// (`application/x-www-form-urlencoded`), or as a JSON object (`application/json`, which is what
/// `rclone rc` sends); the last value of a repeated name wins, and JSON wins over the query.
/// Pure: `RcTests` has the table.
public struct RcRequest: Equatable, Sendable {
    public var call: String
    public var params: [String: RcValue]

    public init(call: String, params: [String: RcValue]) {
        self.call = call
        self.params = params
    }

    /// `target` is the request line's path and query; `contentType` the header, if any.
    public static func parse(method: String, target: String, contentType: String?, body: [UInt8]) -> Result<RcRequest, RcFailure> {
        let (path, query) = split(target)
        let call = String(path.drop { $0 == "/" })
        guard method == "POST" else {
            return .failure(RcFailure(call: call, input: nil, status: method == "GET" || method == "HEAD" ? 404 : 405,
                                      message: method == "GET" || method == "HEAD"
                                          ? "the remote control takes POST requests only (e.g. rclone rc --url http://HOST:PORT/ \(call.isEmpty ? "rc/noop" : call))"
                                          : "method \"\(method)\" not allowed"))
        }
        var params: [String: RcValue] = [:]
        for (k, v) in formPairs(query) { params[k] = .string(v) }
        let media = (contentType ?? "").split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
        switch media {
        case "application/x-www-form-urlencoded":
            guard let text = String(validating: body, as: UTF8.self) else {
                return .failure(RcFailure(call: call, input: params, status: 400, message: "failed to parse form/URL parameters: not UTF-8"))
            }
            for (k, v) in formPairs(Substring(text)) { params[k] = .string(v) }
        case "application/json":
            guard let object = RcValue.parseObject(body) else {
                return .failure(RcFailure(call: call, input: params, status: 400, message: "failed to read input JSON: not a JSON object"))
            }
            params.merge(object) { _, json in json }
        default:
            break   // rclone reads no body of another type either
        }
        return .success(RcRequest(call: call, params: params))
    }

    static func split(_ target: String) -> (path: Substring, query: Substring) {
        guard let q = target.firstIndex(of: "?") else { return (Substring(target), "") }
        return (target[..<q], target[target.index(after: q)...])
    }

    /// `a=1&b=x+y&c=%2F`: pairs in order, `+` a space, percent-escapes decoded (a malformed
    /// escape stays as written, as Go's parser would refuse only the pair).
    static func formPairs(_ text: Substring) -> [(String, String)] {
        text.split(separator: "&", omittingEmptySubsequences: true).compactMap { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String? {
                let spaced = s.replacingOccurrences(of: "+", with: " ")
                return spaced.removingPercentEncoding ?? (spaced.contains("%") ? nil : spaced)
            }
            guard let key = decode(parts[0]), !key.isEmpty, let value = decode(parts.count > 1 ? parts[1] : "") else { return nil }
            return (key, value)
        }
    }
}

/// A refused or failed request, answered in rclone's error shape:
/// `{"error": "...", "input": {...}, "path": "vfs/refresh", "status": 404}` with that HTTP status.
public struct RcFailure: Error, Equatable, Sendable {
    public var call: String
    /// The parameters as read (nil: not read, as rclone sends `null`).
    public var input: [String: RcValue]?
    public var status: Int
    public var message: String

    public init(call: String, input: [String: RcValue]?, status: Int, message: String) {
        self.call = call
        self.input = input
        self.status = status
        self.message = message
    }

    /// The answer's body.
    public var body: RcValue {
        .object(["error": .string(message), "input": input.map(RcValue.object) ?? .null,
                 "path": .string(call), "status": .int(Int64(status))])
    }
}
