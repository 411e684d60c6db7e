import Foundation

/// Whether something is mounted at `path` in this process's mount namespace now, by the mount
/// table (`/proc/self/mountinfo`, whose fifth field is the mountpoint, with space, tab, newline
/// and backslash written as octal escapes). To wait for a mount to come or go, use
/// `MountTableEvents.wait`.
public func isMounted(_ path: String) -> Bool {
    let table = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
    let escaped = path.replacingOccurrences(of: "\\", with: "\\134").replacingOccurrences(of: " ", with: "\\040")
        .replacingOccurrences(of: "\t", with: "\\011").replacingOccurrences(of: "\n", with: "\\012")
    return table.split(separator: "\n").contains { $0.split(separator: " ").dropFirst(4).first.map(String.init) == escaped }
}

extension OriginServer {
    /// Serves at `path` an nginx-style autoindex page listing `names` (a folder's ends in `/`),
    /// with no validators, as nginx sends it.
    public func setAutoindex(_ path: String, _ names: [String]) {
        let rows = names.map { "<a href=\"\($0)\">\($0)</a>                 01-Jan-2024 00:00    -\n" }.joined()
        let html = "<html><head><title>Index of \(path)</title></head><body><h1>Index of \(path)</h1><hr><pre><a href=\"../\">../</a>\n\(rows)</pre><hr></body></html>\n"
        setResponse(path, status: 200, headers: [("Content-Type", "text/html")], body: Array(html.utf8))
    }
}
