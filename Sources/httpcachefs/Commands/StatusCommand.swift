import ArgumentParser
import CacheCore
import Foundation
import Proxy
import TerminalText

/// `httpcachefs status`: the daemons running on this machine (see `DaemonDiscovery`), each with
/// its mounts, proxy, cache summary and fetches in flight.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the running httpcachefs daemons: mounts, proxy, cache use, fetches in flight.",
        discussion: """
            Finds every process on this machine that holds an httpcachefs cache directory open \
            (mount or proxy) and asks its proxy for its status document (the same as \
            /.httpcachefs/status.json, with the key from its owner-only runtime file). A daemon \
            without a proxy is described from its cache index and its command line: cache use \
            and its mount. Another user's daemon (seen as root) is described by what its proxy \
            answers, within a deadline; its cache is never opened. The page address printed for \
            each of your daemons carries its key (?key=): open it as is. --json prints one JSON \
            array with an object per daemon. Every daemon is asked at once, and all of them \
            together get --answer-timeout seconds (default 10, 30 with --json, whose whole documents \
            take longer); one that has not answered by then is listed as such ("answered": \
            false, with the error). Other users' daemons get 10 seconds at most.
            """
    )

    @Flag(help: "Print JSON: one object per daemon (pid, command, cacheDirectory, uptimeSeconds, proxy, page, answered, status; without a status document: cache, mounts, note, error).")
    var json = false

    @Option(help: ArgumentHelp("Seconds all daemons together have to answer (default: 10; 30 with --json).", valueName: "seconds"))
    var answerTimeout: Int?

    func validate() throws {
        if let t = answerTimeout, t < 1 || t > 3600 {
            throw ValidationError("--answer-timeout must be between 1 and 3600 seconds, not \(t)")
        }
    }

    func run() async throws {
        let json = json
        let seconds = answerTimeout ?? (json ? 30 : 10)
        try await runReportingErrors {
            try await onBlockingPool {
                // The text needs no file: it asks for the summary, which stays small at any
                // library size; --json prints the whole document, as it always has.
                let reports = Self.ask(DaemonDiscovery.find(), wholeDocument: json, within: seconds)
                if json {
                    CacheCommand.printLine(String(decoding: try Self.encoder.encode(reports), as: UTF8.self), json: true)
                } else if reports.isEmpty {
                    CacheCommand.printLine(Self.noneFound(othersCount: DaemonDiscovery.othersCount()))
                } else {
                    CacheCommand.printLine(reports.map(Self.render).joined(separator: "\n\n"))
                }
            }
        }
    }

    /// What `status` says when it finds no daemon: root sees every user's, so none is running;
    /// a user sees only their own, and is told when other users run some.
    static func noneFound(othersCount: Int) -> String {
        guard geteuid() != 0, othersCount > 0 else { return "no httpcachefs daemon is running (none holds a cache directory open)" }
        return "no httpcachefs daemon of yours is running; \(othersCount) of other users \(othersCount == 1 ? "is" : "are") (only root's 'httpcachefs status' lists them)"
    }

    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        e.dateEncodingStrategy = .iso8601
        return e
    }()

    /// Root sees every user's daemons, and any user can make a process look like one (and answer
    /// slowly on purpose): other users' daemons get at most this long, whatever `--answer-timeout` says.
    static let othersSeconds = 10

    /// Asks every daemon at once, each on a thread of its own, and waits for them all until one
    /// deadline, `seconds` from now (other users' daemons: `othersSeconds` at most): one that has not answered by then is listed as not answering
    /// (`Report.unanswered`), its thread left behind (the command ends without it). A daemon
    /// busy making a big document, or a process that accepts and says nothing, costs the
    /// command `seconds` at most, however many there are. In the order found (by pid).
    static func ask(_ daemons: [DaemonDiscovery.Daemon], wholeDocument: Bool, within seconds: Int) -> [Report] {
        let start = DispatchTime.now()
        let reports = LockedValue([Report?](repeating: nil, count: daemons.count))
        let group = DispatchGroup()
        for (n, d) in daemons.enumerated() {
            group.enter()
            // The request's own deadline is a second past the command's: the command's decides.
            let timeout = (d.isMine ? seconds : min(seconds, othersSeconds)) + 1
            let thread = Thread {
                let report = Report(d, wholeDocument: wholeDocument, timeout: timeout)
                reports.withLock { if $0[n] == nil { $0[n] = report } }
                group.leave()
            }
            thread.name = "httpcachefs status \(d.pid)"
            thread.start()
        }
        // Each daemon's answer counts until its own limit (other users' end first): what has
        // not come by then is set down as not answering, and a later answer is dropped.
        let limits = daemons.map { $0.isMine ? seconds : min(seconds, othersSeconds) }
        for limit in Set(limits).sorted() {
            _ = group.wait(timeout: start + .seconds(limit))
            reports.withLock { reports in
                for (n, d) in daemons.enumerated() where limits[n] == limit && reports[n] == nil {
                    reports[n] = Report.unanswered(d, within: limit)
                }
            }
        }
        return reports.withLock { $0.compactMap { $0 } }
    }

    /// One daemon, as `--json` prints it.
    struct Report: Encodable {
        var pid: Int32
        var command: String
        var cacheDirectory: String
        var uptimeSeconds: Double?
        /// `http://127.0.0.1:PORT`, nil without a proxy.
        var proxy: String?
        /// The status page's address for its owner (with the key, `?key=`, or under the token):
        /// this user's daemons only.
        var page: String?
        /// The proxy's status document; nil without a proxy (or if it did not answer).
        var status: StatusDocument?
        /// From the index when there is no status document.
        var cache: CacheSummary?
        /// Whether its proxy answered with a status document: nil without a proxy (nothing asked).
        var answered: Bool?
        /// Why its proxy gave no status document ("no answer within 10 s").
        var error: String?
        /// Why there is no status document.
        var note: String?
        /// Without a status document: the mount its command line names, if mounted.
        var mounts: [String]?

        /// Another user's daemon (root's listing) is described by what it publishes: its proxy's
        /// document, asked with the key of a runtime file of that user (`DaemonDiscovery`), with
        /// a deadline and a size bound. Its cache is never opened: that user controls every name
        /// in it.
        /// `timeout`: seconds for the whole answer.
        init(_ d: DaemonDiscovery.Daemon, wholeDocument: Bool, timeout: Int) {
            self.init(fieldsOf: d)
            let notMine = Self.notMine(d)
            guard let p = d.proxy else {
                note = notMine.map { "no proxy: " + $0 } ?? "no proxy: fetches in flight are not known; cache use from the index"
                mounts = d.mountpoints
                if d.isMine { cache = Self.fromIndex(d.cacheDirectory) }
                return
            }
            let path = p.tokenPath(ProxyRouter.documentPath + (wholeDocument ? "" : "?view=summary"))
            // The whole document takes a pass over every entry (seconds at 100k files); the
            // summary is small. A deadline for the whole answer either way (`LoopbackGet`).
            if let body = DaemonControl.ownerGet(path, from: p, timeout: timeout, maxBytes: d.isMine ? LoopbackGet.maxResponseBytes : 32 << 20),
               let document = try? StatusDocument.decode(body) {
                status = document
                uptimeSeconds = document.uptimeSeconds
                answered = true
            } else {
                answered = false
                error = "no status document in its answer (refused, cut short or not one)"
                note = "its proxy at \(p.localBase) did not answer with a status document" + (notMine.map { "; " + $0 } ?? "")
                mounts = d.mountpoints
                if d.isMine { cache = Self.fromIndex(d.cacheDirectory) }
            }
        }

        /// A daemon with a proxy that did not answer within `seconds` (`StatusCommand.ask`): what
        /// is known without it (nothing read of its cache: that could wait as long again).
        /// One without a proxy whose index was not read by then says so.
        static func unanswered(_ d: DaemonDiscovery.Daemon, within seconds: Int) -> Report {
            var r = Report(fieldsOf: d)
            r.mounts = d.mountpoints
            guard let p = d.proxy else {
                r.error = "its cache use was not read from its index within \(seconds) s"
                r.note = "no proxy: fetches in flight are not known"
                return r
            }
            r.answered = false
            r.error = "no answer within \(seconds) s"
            r.note = "its proxy at \(p.localBase) did not answer with a status document"
                + (Self.notMine(d).map { "; " + $0 } ?? "")
            return r
        }

        /// What is said of another user's daemon: why its cache is not read.
        private static func notMine(_ d: DaemonDiscovery.Daemon) -> String? {
            d.isMine ? nil : "uid \(d.uid.map(String.init) ?? "?")'s daemon: its cache is not opened"
        }

        /// The daemon's own fields, nothing asked.
        private init(fieldsOf d: DaemonDiscovery.Daemon) {
            pid = d.pid
            command = d.command
            cacheDirectory = d.cacheDirectory
            uptimeSeconds = d.uptimeSeconds
            proxy = d.proxy?.localBase
            if d.isMine, let p = d.proxy { page = DaemonControl.pageAddress(p) }
        }

        /// Read-only, and only this user's cache (`CacheSnapshot`).
        static func fromIndex(_ directory: String) -> CacheSummary? {
            guard let snapshot = try? CacheSnapshot(configuration: CacheConfiguration(directory: directory, engineClock: .system)) else { return nil }
            return snapshot.summary
        }
    }

    static func render(_ r: Report) -> String {
        var lines = ["pid \(r.pid): \(r.command)"]
        var rows: [[String]] = [
            ["  up:", r.uptimeSeconds.map(Format.duration) ?? "?"],
            ["  cache:", r.cacheDirectory],
        ]
        if let doc = r.status {
            for door in doc.doors {
                if door.kind == "mount" {
                    rows.append(["  mount:", door.mountpoint ?? "?"])
                } else {
                    let token = door.tokenRequired == true ? " (token required)" : ""
                    rows.append(["  proxy:", "\(door.bindAddress ?? "?"):\(door.port.map(String.init) ?? "?")\(token)" + (r.page.map { ", page \($0)" } ?? "")])
                }
            }
        } else if let proxy = r.proxy {
            rows.append(["  proxy:", proxy])
        }
        for mount in r.mounts ?? [] { rows.append(["  mount:", mount]) }
        if let c = r.status?.cache ?? r.cache {
            rows.append(["  used:", "\(Format.bytes(c.usedBytes)) of \(Format.bytes(c.capacityBytes)) (\(Format.percent(c.usedBytes, of: c.capacityBytes))), \(c.files) file\(c.files == 1 ? "" : "s"), \(c.slices) slice\(c.slices == 1 ? "" : "s")\(c.counting == true ? " (still counting since the start)" : ""), free \(Format.bytes(c.filesystemFreeBytes)) (floor \(Format.bytes(c.freeFloorBytes)))"])
        }
        if let doc = r.status {
            let t = doc.totals
            let ratio = doc.cache.hitRatio.map { String(format: "%.1f%%", $0 * 100) } ?? "-"
            rows.append(["  served:", "\(Format.bytes(t.servedFromCache)) from cache, \(Format.bytes(t.servedFromOrigin)) from origin, hit ratio \(ratio), \(doc.errors.count) recent errors"])
            rows.append(["  fetching:", doc.fetches.isEmpty ? "nothing" : "\(doc.fetches.count) transfer\(doc.fetches.count == 1 ? "" : "s")"])
            for o in doc.originsDown ?? [] {
                rows.append(["  origin down:", "\(o.origin) since \(Format.date(o.since)) (\(o.lastError)); serving the cache, probing"])
            }
            if let tier = doc.tier {
                rows.append(["  Tier:", "\(Format.bytes(tier.nodes.reduce(0) { $0 + $1.bytes })) from \(tier.nodes.count) node\(tier.nodes.count == 1 ? "" : "s"), \(Format.bytes(tier.originBytes)) from the origin\(tier.readAheadMax.map { ", read-ahead up to \(Format.bytes($0))" } ?? "")"])
                for n in tier.nodes {
                    rows.append(["    \(n.node):", "\(Format.bytes(n.bytes)), \(n.errors) error\(n.errors == 1 ? "" : "s")\(n.backedOff ? ", skipped (back-off)" : "")"])
                }
            }
        }
        if let error = r.error { rows.append(["  error:", error]) }
        if let note = r.note { rows.append(["  note:", note]) }
        lines.append(TextTable.table(rows))
        if let fetches = r.status?.fetches, !fetches.isEmpty {
            var table = [["    URL", "RANGE", "RECEIVED", "RATE", "CLASS", "AGE"]]
            for f in fetches {
                table.append(["    " + f.url, "\(f.start)-\(f.end.map { String($0 - 1) } ?? "")", Format.bytes(f.bytes),
                              Format.rate(bytes: f.bytes, seconds: f.ageSeconds), f.priority.description, Format.duration(f.ageSeconds)])
            }
            lines.append(TextTable.table(table, rightAligned: [2, 3, 5]))
        }
        return lines.joined(separator: "\n")
    }
}
