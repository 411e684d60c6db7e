import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// Every reader but a player pays for what it reads, through a real mount: a program on no list
/// that opens files for one byte costs the origin about what the kernel asks, not the 256 KiB a
/// player's open takes along; a thumbnailer-like reader (a header, a jump to a tenth of the file,
/// a frame's worth of reads) costs at most half again what it reads. Bytes counted by the
/// in-test origin; no timings.
final class ReadersPayTests: XCTestCase {
    let size = 8 << 20

    private func mount(files: Int, options: MountOptions = MountOptions(readDeadline: nil)) throws -> EngineMount {
        let data = randomBytes(size, seed: 47)
        return try EngineMount(tree: { o in
            try treeFromList((0..<files).map { "films/film\($0).mkv = \(o.url("/v/film\($0).mkv"))" }.joined(separator: "\n"))
        }, options: options, setup: { o in
            for i in 0..<files { o.setFile("/v/film\(i).mkv", data: data, contentType: "video/x-matroska") }
        })
    }

    private func run(_ tool: String, _ arguments: [String]) throws {
        guard let path = ExternalTool.find(tool) else { throw XCTSkip("\(tool) not installed") }
        let out = try withinBound(60, tool) { try ExternalTool.run(path, arguments, timeout: 60) }
        XCTAssertEqual(out.status, 0, out.stderr)
    }

    func testAProgramOnNoListOpeningFilesForOneByteCostsAboutWhatTheKernelAsksPerFile() throws {
        let m = try mount(files: 6)
        defer { m.stop() }
        for i in 0..<6 {
            let path = "/v/film\(i).mkv"
            m.origin.resetLog()
            // `head` is on no list: an unknown reader, through the page cache.
            try run("head", ["-c", "1", m.path("films/film\(i).mkv")])
            let fetched = m.origin.bytesServed(path: path)
            let ranges = m.origin.requests.filter { $0.pathWithoutQuery == path }.map { $0.range ?? "whole" }
            print("head -c 1 of film\(i): the origin sent \(fetched) bytes (\(ranges))")
            XCTAssertGreaterThan(fetched, 0)
            XCTAssertLessThanOrEqual(fetched, 64 << 10, "film\(i): \(fetched) bytes for one byte read: \(ranges)")
        }
    }

    func testAThumbnailerLikeReaderCostsAtMostHalfAgainWhatItReads() throws {
        var options = MountOptions(readDeadline: nil)
        try options.readerClasses.add("dd", as: .background, option: "--background-reader")
        let m = try mount(files: 1, options: options)
        defer { m.stop() }
        let file = m.path("films/film0.mkv"), path = "/v/film0.mkv"
        m.origin.resetLog()
        // A thumbnailer's reads: the header, then a tenth into the film, then on until a frame.
        try run("dd", ["if=\(file)", "of=/dev/null", "bs=32k", "count=4", "status=none"])
        try run("dd", ["if=\(file)", "of=/dev/null", "bs=32k", "skip=\(size / 10 / (32 << 10))", "count=24", "status=none"])
        let read: Int64 = (4 + 24) * (32 << 10)
        let fetched = m.origin.bytesServed(path: path)
        let ranges = m.origin.requests.filter { $0.pathWithoutQuery == path }.map { $0.range ?? "whole" }
        print("a thumbnailer-like reader read \(read) bytes, the origin sent \(fetched) (\(ranges))")
        XCTAssertGreaterThanOrEqual(fetched, read, "every byte it read came from the origin once: \(ranges)")
        // Each open may add a one-byte probe of the file's version.
        XCTAssertLessThanOrEqual(fetched, read + read / 2 + 2, "\(fetched) bytes from the origin for \(read) read: \(ranges)")
    }
}
