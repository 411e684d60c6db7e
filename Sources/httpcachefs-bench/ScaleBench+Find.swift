import ArgumentParser
import Foundation
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `httpcachefs-bench scale --direct-fill`'s `find` step (issue 51: "RSS after mount and after a
/// full `find`"): every cached file listed in one folder (`--index` over a JSON listing of `/c/`,
/// names and sizes only, so a million names stay under a listing's 64 MiB), `find` of the mount
/// to its end (every name looked up, every file's attributes read: nothing opened), and the
/// daemon's resident memory right after the mount and after the `find`. What grows from 10k to
/// 1M is the mount's tree of names (the listing), not the cache's entries: a lookup of a listed
/// file reads no entry.
extension ScaleBench {
    struct FindFigures {
        var files: Int
        var seconds: Double
        var residentAfterMount: Int64
        var residentAfterFind: Int64
    }

    static func findStep(files: Int, origin: OriginServer, directory: String, binary: String,
                         temp: TemporaryDirectory) throws -> FindFigures {
        var listing: [UInt8] = []
        listing.reserveCapacity(files * 50)
        listing += Array("[".utf8)
        for i in 0..<files {
            if i > 0 { listing += Array(",\n".utf8) }
            listing += Array(#"{"name":"\#(String(format: "%07d.bin", i))","type":"file","size":\#(cachedFileLength)}"#.utf8)
        }
        listing += Array("]".utf8)
        origin.setFile("/c/", data: listing, contentType: "application/json")
        let mnt = temp.appending("mnt-find")
        let daemon = try MountDaemon(binary: binary, mountpoint: mnt, cacheDirectory: directory, cacheSize: 1 << 40,
                                     entries: [], logFile: temp.appending("find.log"), proxy: false,
                                     extraArguments: ["--index", origin.url("/c/"), "--no-passthrough", "--listing-memory", "4G"])
        defer { daemon.unmount() }
        let afterMount = try daemon.residentMemory()
        let seconds = try Spawned.time("/usr/bin/find", [mnt, "-type", "f"])
        let afterFind = try daemon.residentMemory()
        let shown = (try? FileManager.default.contentsOfDirectory(atPath: mnt).count) ?? 0
        guard shown == files else { throw ValidationError("the find mount shows \(shown) files, not \(files)") }
        return FindFigures(files: files, seconds: seconds, residentAfterMount: afterMount, residentAfterFind: afterFind)
    }
}
