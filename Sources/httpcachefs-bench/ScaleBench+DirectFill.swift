import ArgumentParser
import CacheCore
import Foundation
import GRDB
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `httpcachefs-bench scale --direct-fill`: caches of up to a million entries, built in about a
/// minute, and the figures of issue 51 over them (daemon memory after mount, mount start,
/// `cache ls` to its first line and to its end, `status.json?view=summary`, `cat` of 10,000 of its
/// small files against plain ones: `ScaleBench+SmallFiles`).
///
/// The cache is made the way the daemon would find it after a long fill, without fetching a
/// million files: `seedFiles` files are cached by an in-process engine (real rows, real data
/// files, real checksums), then their rows are copied into the index under new ids and the names
/// of new files (`/c/NNNNNNN.bin`), and each copy's data file is a hard link to its seed's (same
/// bytes, so the same checksums; one inode per seed, well under ext4's link limit). The index
/// schema is written here by hand, so this step follows `CacheIndex`'s tables.
extension ScaleBench {
    static let seedFiles = 1000

    /// One size's figures.
    struct CacheFigures {
        var files: Int
        var fillSeconds: Double
        var lsFirstLine: Double
        var lsEnd: Double
        var lsLines: Int
        /// The first start, over the index as the fill wrote it (another program: summed,
        /// counted and checked in full, as after a crash).
        var firstMountSeconds: Double
        /// A restart after the daemon's clean stop (what it left read from one row).
        var mountSeconds: Double
        var residentAfterMount: Int64
        var summarySeconds: Double
        /// Seconds from the mount's start until the summary's totals were whole (the start's
        /// count of the index, in the background: `cache.counting`).
        var countedSeconds: Double
        /// `cache ls` while the daemon (with its proxy) holds the cache.
        var lsBesideDaemon: (first: Double, end: Double, lines: Int)
        var small: SmallFileFigures
        /// Every file listed in one folder of a mount, `find` to its end (`ScaleBench+Find`).
        var find: FindFigures
        /// A stop right after a start, the daemon's first seconds (`ScaleBench+Restart`).
        var restart: RestartFigures
    }

    static func directFillRun(counts: [Int], binary: String, restartOnly: Bool = false, entryMemory: String? = nil) async throws {
        print("direct fill: a seed of \(seedFiles) files through an engine, the rest copied in the index (data files hard-linked)")
        print(idlePolicy())
        var figures: [CacheFigures] = []
        for n in counts {
            let temp = TemporaryDirectory(prefix: "httpcachefs-bench-scale")
            defer { temp.remove() }
            let origin = try OriginServer()
            defer { origin.stop() }
            let dir = temp.appending("cache")
            let began = DispatchTime.now().uptimeNanoseconds
            try await directFill(files: n, origin: origin, directory: dir)
            let fill = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
            sync()
            let ls = try firstLineAndEnd(binary, ["cache", "ls", "--cache-dir", dir])
            let firstStarted = DispatchTime.now().uptimeNanoseconds
            let daemon = try MountDaemon(binary: binary, mountpoint: temp.appending("mnt"), cacheDirectory: dir, cacheSize: 1 << 40,
                                         entries: ["one.bin=" + origin.url("/c/0000000.bin")], logFile: temp.appending("mount.log"))
            let firstMount = Double(DispatchTime.now().uptimeNanoseconds - firstStarted) / 1e9
            let firstCounted = try summaryCounted(directory: dir, since: firstStarted)
            daemon.unmount()   // a clean stop
            if restartOnly {
                let r = try restartStep(daemon: daemon)
                print(String(format: "  %d files: first start over the fill %.3f s", n, firstMount))
                printRestart(r)
                continue
            }
            let started = DispatchTime.now().uptimeNanoseconds
            try daemon.mount()
            let mount = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            let rss = try daemon.residentMemory()
            let counted = try summaryCounted(directory: dir, since: started)
            let summary = try bestSummary(daemon: daemon, directory: dir)
            let lsDaemon = try firstLineAndEnd(binary, ["cache", "ls", "--cache-dir", dir])
            daemon.unmount()
            let small = try smallFileStep(files: n, origin: origin, directory: dir, binary: binary, temp: temp, entryMemory: entryMemory)
            let find = try findStep(files: n, origin: origin, directory: dir, binary: binary, temp: temp)
            let restart = try restartStep(daemon: daemon)
            let f = CacheFigures(files: n, fillSeconds: fill, lsFirstLine: ls.first, lsEnd: ls.end, lsLines: ls.lines,
                                 firstMountSeconds: firstMount, mountSeconds: mount, residentAfterMount: rss, summarySeconds: summary, countedSeconds: counted, lsBesideDaemon: lsDaemon, small: small,
                                 find: find, restart: restart)
            print(String(format: "  %d files (filled in %.1f s): cache ls first line %.3f s, end %.3f s (%d lines); mount %.3f s, RSS %@; summary %.1f ms",
                         n, fill, f.lsFirstLine, f.lsEnd, f.lsLines, f.mountSeconds, CoreBench.human(rss), f.summarySeconds * 1000))
            print(String(format: "    first start over the filled index %.3f s, its summary's totals whole %.3f s after it began; after a clean stop: mount %.3f s, totals whole %.3f s after it began",
                         firstMount, firstCounted, mount, counted))
            print(String(format: "    cache ls beside the daemon: first line %.3f s, end %.3f s (%d lines)", lsDaemon.first, lsDaemon.end, lsDaemon.lines))
            print(String(format: "    cat of %d small files: first through the mount %.3f s, again %.3f s, plain files %.3f s (%.2fx); daemon %.1f µs CPU per file",
                         small.files, small.firstCat, small.repeatCat, small.plainCat, small.repeatCat / small.plainCat, small.daemonMicrosPerFile))
            print(String(format: "      with --fuse-spin 0 (the loop sleeps between requests): again %.3f s (%.2fx); daemon %.1f µs CPU per file",
                         small.repeatCatNoSpin, small.repeatCatNoSpin / small.plainCat, small.daemonMicrosPerFileNoSpin))
            print(String(format: "    every file listed in one folder: RSS after mount %@, find to its end %.3f s, RSS after it %@",
                         CoreBench.human(find.residentAfterMount), find.seconds, CoreBench.human(find.residentAfterFind)))
            printRestart(restart)
            figures.append(f)
        }
        guard !restartOnly else { return }
        // The issue's goals: RSS <= 64 MiB + 0.2 KiB per entry, mount <= 1 s, summary <= 20 ms.
        var rows = [["files", "RSS after mount", "goal", "RSS after a find of every file listed", "first start over the fill", "restart after a clean stop", "cache ls first line", "cache ls end", "cache ls beside the daemon: first, end", "summary",
                     "cat small files: first, again vs plain", "daemon CPU per small file", "--fuse-spin 0: again vs plain, CPU"]]
        for f in figures {
            let goal = Int64(64 << 20) + Int64(f.files) * 205
            rows.append(["\(f.files)", CoreBench.human(f.residentAfterMount), "<= " + CoreBench.human(goal),
                         CoreBench.human(f.find.residentAfterFind) + String(format: " (%.1f s)", f.find.seconds),
                         String(format: "%.3f s", f.firstMountSeconds), String(format: "%.3f s", f.mountSeconds), String(format: "%.3f s", f.lsFirstLine),
                         String(format: "%.3f s", f.lsEnd), String(format: "%.3f s, %.3f s", f.lsBesideDaemon.first, f.lsBesideDaemon.end),
                         String(format: "%.1f ms", f.summarySeconds * 1000),
                         String(format: "%.3f s, %.3f s vs %.3f s: %.2fx", f.small.firstCat, f.small.repeatCat, f.small.plainCat,
                                f.small.repeatCat / f.small.plainCat),
                         String(format: "%.1f µs", f.small.daemonMicrosPerFile),
                         String(format: "%.2fx, %.1f µs", f.small.repeatCatNoSpin / f.small.plainCat, f.small.daemonMicrosPerFileNoSpin)])
        }
        print(CoreBench.table(rows))
        print("goals (issue 51): mount <= 1 s, summary <= 20 ms, cache ls first line at once, small files <= 3x plain files")
    }

    static func printRestart(_ r: RestartFigures) {
        print(String(format: "    SIGTERM as soon as the mount is usable, to the exit: after a clean stop %.3f s, after kill -9 %.3f s",
                     r.stopAfterClean, r.stopAfterCrash))
        print(String(format: "    the first %.0f s after the mount is usable: after a clean stop %.2f CPU-s, RSS up to %@; after kill -9 %.2f CPU-s, RSS up to %@",
                     firstSeconds, r.firstAfterClean.cpu, CoreBench.human(r.firstAfterClean.rss), r.firstAfterCrash.cpu,
                     CoreBench.human(r.firstAfterCrash.rss)))
        print(String(format: "    until the daemon idles: after a clean stop %.1f s, %.2f CPU-s; after kill -9 %.1f s, %.2f CPU-s",
                     r.idleAfterClean.seconds, r.idleAfterClean.cpu, r.idleAfterCrash.seconds, r.idleAfterCrash.cpu))
    }

    /// Builds a cache of `files` files of 4 KiB in `directory` (see the type's note).
    static func directFill(files: Int, origin: OriginServer, directory: String) async throws {
        let seed = min(files, seedFiles)
        _ = try await fill(files: seed, origin: origin, directory: directory)
        guard files > seed else { return }
        try copySeedRows(files: files, seed: seed, directory: directory)
    }

    /// The rows of the `seed` cached files copied until the index holds `files`, each copy's data
    /// file a hard link to its seed's. Synchronous: GRDB's blocking calls, off any async context.
    static func copySeedRows(files: Int, seed: Int, directory: String) throws {
        let queue = try DatabaseQueue(path: directory + "/index.sqlite")
        defer { try? queue.close() }
        let seeds = try queue.read { db in
            try Row.fetchAll(db, sql: "SELECT id, generation, url FROM entry ORDER BY id").map { (id: $0[0] as Int64, generation: $0[1] as Int64, url: $0[2] as String) }
        }
            // Only seeds whose data file is there: an entry may be listed before its bytes land.
            .filter { access(directory + "/" + dataFile(entry: $0.id, generation: $0.generation), F_OK) == 0 }
        if seeds.count < seed { print("  (\(seed - seeds.count) of the \(seed) seed entries have no data file; not copied)") }
        guard seeds.count >= seed * 9 / 10 else { throw ValidationError("the seed cache holds \(seeds.count) entries with data files, not \(seed)") }
        let firstID = try queue.read { db in try Int64.fetchOne(db, sql: "SELECT max(id) FROM entry") ?? 0 } + 1
        try queue.write { db in
            let entry = try db.makeStatement(sql: """
                INSERT INTO entry (id, key, url, final_url, length, content_type, etag, last_modified, accepts_ranges, generation,
                    validated_at, last_access, hits, misses, bytes_from_cache, bytes_from_origin, last_error)
                SELECT ?, replace(key, ?, ?), replace(url, ?, ?), replace(final_url, ?, ?), length, content_type, etag, last_modified,
                    accepts_ranges, generation, validated_at, last_access, hits, misses, bytes_from_cache, bytes_from_origin, last_error
                FROM entry WHERE id = ?
                """)
            let extent = try db.makeStatement(sql: """
                INSERT INTO extent (entry_id, generation, slice, start, "end", checksum)
                SELECT ?, generation, slice, start, "end", checksum FROM extent WHERE entry_id = ?
                """)
            for n in seed..<files {
                let s = seeds[n % seeds.count]
                guard let slash = s.url.range(of: "/c/", options: .backwards) else { throw ValidationError("unexpected seed URL \(s.url)") }
                let old = String(s.url[slash.lowerBound...])
                let new = String(format: "/c/%07d.bin", n)
                let id = firstID + Int64(n - seed)
                try entry.execute(arguments: [id, old, new, old, new, old, new, s.id])
                try extent.execute(arguments: [id, s.id])
                let from = directory + "/" + dataFile(entry: s.id, generation: s.generation)
                let folder = directory + "/" + dataFolder(entry: id)
                if n < seed + 256 { mkdir(folder, 0o700) }
                guard link(from, folder + "/\(id)-\(s.generation).data") == 0 else {
                    throw ValidationError("cannot link \(from): \(String(cString: strerror(errno)))")
                }
            }
            try db.execute(sql: "UPDATE sqlite_sequence SET seq = ? WHERE name = 'entry'", arguments: [firstID + Int64(files - seed) - 1])
        }
        try queue.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
    }

    /// `data/<low byte of the id, hex>`, as `DataFiles` names it.
    static func dataFolder(entry: Int64) -> String { "data/" + String(format: "%02x", Int(entry & 0xFF)) }
    static func dataFile(entry: Int64, generation: Int64) -> String { dataFolder(entry: entry) + "/\(entry)-\(generation).data" }

    /// Best of three `status.json?view=summary` over loopback.
    /// Asks for the summary until it no longer says `counting` (every 20 ms, at most 300 s);
    /// returns the seconds since `since` (a benchmark's wait: tests wait on events).
    static func summaryCounted(directory: String, since: UInt64) throws -> Double {
        guard let runtime = FileManager.default.contents(atPath: directory + "/proxy.json"),
              let object = try? JSONSerialization.jsonObject(with: runtime) as? [String: Any], let port = object["port"] as? Int else {
            throw ValidationError("the daemon over \(directory) left no proxy.json with its port")
        }
        let owner = (object["controlKey"] as? String).map { [("X-Httpcachefs-Control", $0)] } ?? []
        let deadline = DispatchTime.now().uptimeNanoseconds + 300_000_000_000
        while DispatchTime.now().uptimeNanoseconds < deadline {
            let r = try RawHTTP.request(port: port, path: "/.httpcachefs/status.json?view=summary", headers: owner, timeout: 300)
            guard r.status == 200 else { throw ValidationError("status.json?view=summary: HTTP \(r.status)") }
            let doc = try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]
            if (doc?["cache"] as? [String: Any])?["counting"] == nil { return Double(DispatchTime.now().uptimeNanoseconds - since) / 1e9 }
            usleep(20_000)
        }
        throw ValidationError("the summary still counts after 300 s")
    }

    static func bestSummary(daemon: MountDaemon, directory: String) throws -> Double {
        guard let runtime = FileManager.default.contents(atPath: directory + "/proxy.json"),
              let object = try? JSONSerialization.jsonObject(with: runtime) as? [String: Any], let port = object["port"] as? Int else {
            throw ValidationError("the daemon over \(directory) left no proxy.json with its port")
        }
        let owner = (object["controlKey"] as? String).map { [("X-Httpcachefs-Control", $0)] } ?? []
        var best = Double.infinity
        for _ in 0..<3 {
            let began = DispatchTime.now().uptimeNanoseconds
            let r = try RawHTTP.request(port: port, path: "/.httpcachefs/status.json?view=summary", headers: owner, timeout: 300)
            guard r.status == 200 else { throw ValidationError("status.json?view=summary: HTTP \(r.status)") }
            best = min(best, Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9)
        }
        return best
    }

    /// Runs a command with its standard output on a pipe: seconds to its first line, to its end,
    /// and the lines it printed.
    static func firstLineAndEnd(_ path: String, _ args: [String]) throws -> (first: Double, end: Double, lines: Int) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw ValidationError("pipe: \(String(cString: strerror(errno)))") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        let argv = ([path] + args).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let began = DispatchTime.now().uptimeNanoseconds
        let rc = posix_spawn(&pid, path, &actions, nil, argv, environ)
        close(fds[1])
        defer { close(fds[0]) }
        guard rc == 0 else { throw ValidationError("cannot run \(path): \(String(cString: strerror(rc)))") }
        var first: Double?
        var lines = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let got = buffer.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, $0.count) }
            if got < 0 && errno == EINTR { continue }
            if got <= 0 { break }
            let newlines = buffer[0..<got].reduce(0) { $0 + ($1 == 10 ? 1 : 0) }
            if newlines > 0 && first == nil { first = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9 }
            lines += newlines
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let end = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
        guard status == 0 else { throw ValidationError("\(path) \(args.prefix(2).joined(separator: " ")) failed with status \(status)") }
        return (first ?? end, end, lines)
    }
}
