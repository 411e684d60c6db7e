import Foundation
import Proxy

/// Whether a process listens on a TCP port, read from `/proc`: the listening sockets of
/// `/proc/net/tcp` and `tcp6` on that port, against the sockets among the process's descriptors.
///
/// Control requests carry the daemon's control key to the port its `proxy.json` names. If the
/// daemon's proxy stopped while the daemon lives on, another program may listen there by now:
/// the key is sent only to a port the daemon itself holds.
enum ListenerOwner {
    /// True when `pid` holds a listening socket on `port`, false when it holds none, nil when
    /// `/proc` cannot tell (not readable, or another user's process as a user).
    static func listens(pid: Int32, port: Int, procRoot: String = "/proc") -> Bool? {
        guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "\(procRoot)/\(pid)/fd") else { return nil }
        var sockets = Set<String>()
        for fd in descriptors {
            if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(procRoot)/\(pid)/fd/\(fd)"),
               target.hasPrefix("socket:[") {
                sockets.insert(String(target.dropFirst("socket:[".count).dropLast()))
            }
        }
        var readable = false
        for table in ["tcp", "tcp6"] {
            // Read to the end: Foundation's `String(contentsOfFile:)` returns the first 4 KiB of it.
            guard let text = ProcFile.read("\(procRoot)/net/\(table)") else { continue }
            readable = true
            if listeningInodes(text, port: port).contains(where: sockets.contains) { return true }
        }
        return readable ? false : nil
    }

    /// The inodes of the sockets listening (state 0A) on `port` in a `/proc/net/tcp` table.
    static func listeningInodes(_ table: String, port: Int) -> [String] {
        table.split(separator: "\n").dropFirst().compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count > 9, fields[3] == "0A", let colon = fields[1].lastIndex(of: ":"),
                  Int(fields[1][fields[1].index(after: colon)...], radix: 16) == port else { return nil }
            return String(fields[9])
        }
    }
}
