import ArgumentParser
import Foundation
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `httpcachefs-bench scale --direct-fill`'s small-file step (issue 51): `cat` of 10,000 cached
/// files of 4 KiB through a mount, against `cat` of as many plain files of 4 KiB on the same disk,
/// in the same run.
///
/// The mount lists the cached files through an nginx-style JSON listing of `/c/` (`--index`),
/// without passthrough (a user's mount): its first `cat` looks up and opens every file; the
/// repeated ones find the names in the kernel's dentry cache and, for a version unchanged since
/// the last open, the bytes in its page cache (`keep_cache`), so what is left is the open and
/// release each file costs the daemon. The plain files were just written: in the page cache too.
/// Each figure: best of three; the daemon's CPU over the repeated `cat`s, per file. Then the same
/// with `--fuse-spin 0` (a FUSE loop that sleeps between requests), in the same run. With
/// `--entry-memory` smaller than the files' entries (4M: ~3,000), every repeated open loads its
/// entry from the index: the daemon's CPU per file is then what a load costs, plus the open.
extension ScaleBench {
    static let smallFiles = 10_000

    /// How this machine's idle CPUs wait, which the small-file step turns on: each `cat` of a
    /// cached file is two FUSE round trips, each a wake-up of a thread on the other CPU. A guest
    /// whose idle CPU halts at once (`haltpoll` with `guest_halt_poll_ns` 0) pays an interrupt
    /// through the host for each; with the kernel's default (200 µs of polling first) the same
    /// step ran at 1.7-1.8x plain files instead of 2.7x (session 7).
    static func idlePolicy() -> String {
        func read(_ path: String) -> String? {
            (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let driver = read("/sys/devices/system/cpu/cpuidle/current_driver") ?? "unknown"
        guard driver == "haltpoll", let poll = read("/sys/module/haltpoll/parameters/guest_halt_poll_ns") else {
            return "idle CPUs: cpuidle driver \(driver)"
        }
        return "idle CPUs: cpuidle driver haltpoll, guest_halt_poll_ns \(poll)"
            + (poll == "0" ? " (an idle CPU halts at once: each wake-up of the other CPU is an interrupt through the host)" : "")
    }

    struct SmallFileFigures {
        var files: Int
        var firstCat: Double
        var repeatCat: Double
        var plainCat: Double
        var daemonMicrosPerFile: Double
        /// With `--fuse-spin 0`.
        var repeatCatNoSpin: Double
        var daemonMicrosPerFileNoSpin: Double
    }

    static func smallFileStep(files cached: Int, origin: OriginServer, directory: String, binary: String,
                              temp: TemporaryDirectory, entryMemory: String? = nil) throws -> SmallFileFigures {
        let files = min(cached, smallFiles)
        let names = (0..<files).map { String(format: "%07d.bin", $0) }
        let date = "Mon, 23 Nov 2026 10:00:00 GMT"
        let items = names.map { #"{"name":"\#($0)","type":"file","mtime":"\#(date)","size":\#(cachedFileLength)}"# }
        origin.setFile("/c/", data: Array(("[" + items.joined(separator: ",\n") + "]").utf8), contentType: "application/json")

        let plain = temp.appending("plain")
        try FileManager.default.createDirectory(atPath: plain, withIntermediateDirectories: true)
        let bytes = Data(repeating: 0x5a, count: cachedFileLength)
        for name in names where !FileManager.default.createFile(atPath: plain + "/" + name, contents: bytes) {
            throw ValidationError("cannot write the plain file \(plain)/\(name)")
        }
        var plainBest = Double.infinity
        for _ in 0..<3 { plainBest = min(plainBest, try Spawned.time("/bin/cat", names.map { plain + "/" + $0 })) }

        let spinning = try repeatedCats(paths: names, binary: binary, directory: directory, origin: origin, temp: temp,
                                        extra: entryMemory.map { ["--entry-memory", $0] } ?? [])
        // The same with a loop that always sleeps between requests: what the spin buys, and what
        // of the daemon's CPU is its work rather than its wait awake (`LoopSpin`).
        let sleeping = try repeatedCats(paths: names, binary: binary, directory: directory, origin: origin, temp: temp,
                                        extra: (entryMemory.map { ["--entry-memory", $0] } ?? []) + ["--fuse-spin", "0"])
        return SmallFileFigures(files: files, firstCat: spinning.first, repeatCat: spinning.again, plainCat: plainBest,
                                daemonMicrosPerFile: spinning.micros, repeatCatNoSpin: sleeping.again,
                                daemonMicrosPerFileNoSpin: sleeping.micros)
    }

    /// A mount of `/c/`: `cat` of every file once (the first, which fetches or loads), then three
    /// times more (best of three), and the daemon's CPU per file over those three.
    private static func repeatedCats(paths names: [String], binary: String, directory: String, origin: OriginServer,
                                     temp: TemporaryDirectory, extra: [String]) throws -> (first: Double, again: Double, micros: Double) {
        let mnt = temp.appending("mnt-small")
        let daemon = try MountDaemon(binary: binary, mountpoint: mnt, cacheDirectory: directory, cacheSize: 1 << 40,
                                     entries: [], logFile: temp.appending("small.log"), proxy: false,
                                     extraArguments: ["--index", origin.url("/c/"), "--no-passthrough"] + extra)
        defer { daemon.unmount() }
        let paths = names.map { mnt + "/" + $0 }
        let first = try Spawned.time("/bin/cat", paths)
        var repeated = Double.infinity
        let cpuBefore = try daemon.cpuSeconds()
        for _ in 0..<3 { repeated = min(repeated, try Spawned.time("/bin/cat", paths)) }
        let cpu = try daemon.cpuSeconds() - cpuBefore
        let log = (try? String(contentsOfFile: temp.appending("small.log"), encoding: .utf8)) ?? ""
        if log.contains("error") { print("  (the small-file mount logged errors: \(log.suffix(500)))") }
        return (first, repeated, cpu / Double(3 * names.count) * 1e6)
    }
}
