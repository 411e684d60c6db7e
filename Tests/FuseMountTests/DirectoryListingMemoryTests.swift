import Foundation
import Glibc
import Logging
import XCTest
@testable import FuseMount

/// A measurement run by hand, not a test of times: hostile listings through the parser, with the
/// CPU time per MB and the resident memory before and after. Skipped unless
/// `HTTPCACHEFS_LISTING_BENCH=1`:
///
///     HTTPCACHEFS_LISTING_BENCH=1 swift test --disable-swift-testing --skip-build \
///         --filter DirectoryListingMemoryTests
final class DirectoryListingMemoryTests: XCTestCase {
    static let pageBytes = 8 << 20
    static let pages = Int(ProcessInfo.processInfo.environment["HTTPCACHEFS_LISTING_BENCH_PAGES"] ?? "") ?? 20

    /// One `<a href>` of the whole page.
    static func hugeHref() -> [UInt8] {
        Array("<html><pre><a href=\"".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: pageBytes) + Array("\">x</a></pre></html>".utf8)
    }

    /// As many tiny links as fit.
    static func tinyLinks() -> [UInt8] {
        var out = Array("<html><pre>".utf8)
        var i = 0
        while out.count < pageBytes {
            out += Array("<a href=\"f\(i)\">f</a> 04-Jan-2024 10:00 \(i)\n".utf8)
            i += 1
        }
        return out
    }

    /// Tags nested as deep as the page goes, a link at the bottom.
    static func nested() -> [UInt8] {
        let open = Array("<div><span>".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(pageBytes + 64)
        while out.count < pageBytes { out += open }
        return out + Array("<a href=\"deep\">deep</a>".utf8)
    }

    static func residentMiB() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kb = line.split(separator: " ").dropFirst().first.flatMap({ Double($0) }) else { return -1 }
        return kb / 1024
    }

    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    func testHostileListingsCPUAndResidentMemory() throws {
        guard ProcessInfo.processInfo.environment["HTTPCACHEFS_LISTING_BENCH"] == "1" else {
            throw XCTSkip("a measurement run by hand: HTTPCACHEFS_LISTING_BENCH=1")
        }
        let before = Self.residentMiB()
        var kept: [[ListingEntry]] = []
        for (label, make) in [("one huge href", Self.hugeHref), ("tiny links", Self.tinyLinks), ("nested tags", Self.nested)] {
            var cpu = 0.0, megabytes = 0.0, entries = 0
            for _ in 0..<Self.pages {
                let page = make()
                let start = Self.cpuSeconds()
                let parsed = try DirectoryListing.parse(page, url: "http://o/pub/", logger: silent)
                cpu += Self.cpuSeconds() - start
                megabytes += Double(page.count) / 1e6
                entries = parsed.count
                kept.append(parsed)   // what a mount would keep (the budget's business)
            }
            print(String(format: "%@: %.4f CPU-s per MB (%d entries a page), RSS %.0f MiB", label, cpu / megabytes, entries, Self.residentMiB()))
        }
        let keptMiB = Double(kept.reduce(0) { $0 + FileSystemCore.listingCost($1) }) / Double(1 << 20)
        print(String(format: "RSS before %.0f MiB, after %d pages of 8 MiB %.0f MiB (entries kept, as the budget counts them: %.0f MiB)",
                     before, 3 * Self.pages, Self.residentMiB(), keptMiB))
        kept = []
        print(String(format: "RSS with the entries let go: %.0f MiB", Self.residentMiB()))
        HeapTrim.releaseFreedMemory()
        print(String(format: "RSS after malloc_trim: %.0f MiB", Self.residentMiB()))
    }

    private var silent: Logger {
        var logger = Logger(label: "bench")
        logger.logLevel = .critical
        return logger
    }
}
