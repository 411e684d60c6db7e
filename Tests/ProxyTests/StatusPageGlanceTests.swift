@testable import CacheCore
import Foundation
import Logging
@testable import Proxy
import TestSupport
import XCTest

/// The status page read at a glance (issue 50), in headless Chromium: a fetch's class by the name
/// `httpcachefs status` gives it, a small cache's folders open (at most 50 files), each summary
/// figure with a line on what it counts, and the bandwidth limit with its next change. Pictures
/// at desktop (1280×800) and phone (390×844) width, with 2 files and with 300, go to
/// `TestOutput.directory` for a person to look at.
final class StatusPageGlanceTests: XCTestCase {
    private static let length = 4 << 20
    /// Passed to the page as the timetable's next change.
    private static let nextChange = Date(timeIntervalSince1970: 1_800_000_000)

    /// Each class code in the page's script names the class as `FetchPriority` (and so the CLI's
    /// `status`) does: a class added to one and not the other fails here.
    func testThePageNamesEachFetchClassAsTheCLIDoes() {
        for p in FetchPriority.allCases {
            XCTAssertTrue(StatusPage.text.contains("\(p.rawValue): \"\(p.description)\""), "\(p) is not named in the page")
        }
        XCTAssertFalse(StatusPage.text.contains("f.priority || \"\""), "code 0 (waiting) drawn as nothing")
    }

    func testTwoFilesShowOpenWithTheirClassWhatEachFigureCountsAndTheLimit() throws {
        guard let chromium = ExternalTool.find("chromium", "chromium-browser", "google-chrome") else {
            print("⚠️  SKIPPING browser test: chromium not installed (Debian package chromium)")
            throw XCTSkip("chromium not installed (Debian package chromium)")
        }
        let h = try ProxyHarness(configuration: ProxyConfiguration(port: 0), cache: {
            var c = CacheConfiguration(directory: $0, freeSpaceFloor: 0, sliceSize: 1 << 20, initialReadAhead: 0, maxReadAhead: 0, engineClock: .realTime)
            c.bandwidthLimit = { _ in BandwidthLimitStatus(bytesPerSecond: 512 << 10, nextChange: Self.nextChange, nextBytesPerSecond: 0) }
            return c
        })
        defer { h.shutdown() }
        // Two files in two folders; the second's fetch held open by a trickling origin.
        let folderName = "/a-season-folder-with-a-rather-long-name-that-a-phone-cannot-show-on-one-line/"
        h.origin.setFile("/films/a.mp4", data: testBytes(Self.length, seed: 1))
        h.origin.setFile(folderName + "b.mp4", data: testBytes(Self.length, seed: 2))
        XCTAssertEqual(try h.get(h.path("/films/a.mp4"), [("Range", "bytes=0-1048575")]).status, 206)
        XCTAssertEqual(try h.get(h.path(folderName + "b.mp4"), [("Range", "bytes=0-0")]).status, 206)
        h.engine.core.writes.waitIdle()
        h.origin.setFaults(folderName + "b.mp4", Faults(bytesPerSecond: 100))
        let request = Array("GET \(h.path(folderName + "b.mp4")) HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=2000000-2099999\r\nConnection: close\r\n\r\n".utf8)
        let port = h.port, asked = h.origin.requestCount(path: folderName + "b.mp4")
        DispatchQueue.global().async { _ = try? RawHTTP.exchange(port: port, send: request, timeout: 120) }   // ends with the harness
        guard h.origin.waitForRequests(path: folderName + "b.mp4", count: asked + 1) else {
            return XCTFail("the trickled fetch never started")
        }
        let doc = h.engine.statusDocument(version: "test", showDirectory: false)
        XCTAssertEqual(doc.cache.files, 2)
        XCTAssertEqual(doc.fetches.map(\.priority), [.waiting], "a read waits on the trickled fetch")
        XCTAssertEqual(doc.bandwidth, BandwidthLimitStatus(bytesPerSecond: 512 << 10, nextChange: Self.nextChange, nextBytesPerSecond: 0))

        let page = "http://127.0.0.1:\(h.port)/.httpcachefs/?key=\(h.configuration.controlKey)"
        let profile = TemporaryDirectory(prefix: "httpcachefs-chromium")
        defer { profile.remove() }
        var failures: [String] = []
        for (width, height) in [(1280, 800), (500, 844)] {
            let dump = try ExternalTool.run(chromium, Self.flags(profile, width, height) + ["--dump-dom", page], timeout: 120)
            if dump.status != 0 { failures.append("chromium exited \(dump.status): \(dump.stderr.suffix(2000))") }
            failures += Self.problems(dump.stdout, files: [h.origin.url("/films/a.mp4"), h.origin.url(folderName + "b.mp4")])
                .map { "\(width)×\(height): \($0)" }
            if width < 720, Self.folderNameLines(dump.stdout) < 2 { failures.append("\(width): the long folder name is on \(Self.folderNameLines(dump.stdout)) line, not wrapped") }
        }
        failures += try Self.pictures(chromium, profile: profile, page: page, name: "2-files")
        XCTAssertTrue(failures.isEmpty, failures.joined(separator: "\n"))
    }

    /// 300 files: past the 50 of a small cache, every folder stays collapsed (one row each).
    func testThreeHundredFilesShowCollapsedFoldersAtBothWidths() async throws {
        guard let chromium = ExternalTool.find("chromium", "chromium-browser", "google-chrome") else {
            print("⚠️  SKIPPING browser test: chromium not installed (Debian package chromium)")
            throw XCTSkip("chromium not installed (Debian package chromium)")
        }
        let long = "/a-season-folder-with-a-rather-long-name-that-a-phone-cannot-show-on-one-line/e0001.mkv"
        let library = try await StatusViewsTests.Library(paths: StatusViewsTests.paths(files: 299, folders: 6) + [long])
        defer { library.close() }
        let configuration = ProxyConfiguration(port: 0)
        let server = ProxyServer(engine: library.engine, configuration: configuration, logger: Logger(label: "status-glance"))
        let port = try server.start()
        defer { server.stop() }
        let page = "http://127.0.0.1:\(port)/.httpcachefs/?key=\(configuration.controlKey)"
        let profile = TemporaryDirectory(prefix: "httpcachefs-chromium")
        defer { profile.remove() }
        var failures: [String] = []
        for (width, height) in [(1280, 800), (500, 844)] {
            let dom = try ExternalTool.run(chromium, Self.flags(profile, width, height) + ["--dump-dom", page], timeout: 120).stdout
            let folders = dom.components(separatedBy: "<tr class=\"folder").count - 1
            if folders != 7 { failures.append("\(width): \(folders) folder rows, expected 7") }
            if dom.contains("<tr data-url=") || dom.contains("<tr class=\"folder open") { failures.append("\(width): a folder open at 300 files") }
            failures += StatusPageScaleTests.widthProblems(dom).map { "\(width): \($0)" }
            if width < 720, Self.folderNameLines(dom) < 2 { failures.append("\(width): the long folder name is on \(Self.folderNameLines(dom)) line, not wrapped") }
        }
        failures += try Self.pictures(chromium, profile: profile, page: page, name: "300-files")
        XCTAssertTrue(failures.isEmpty, failures.joined(separator: "\n"))
    }

    /// The most lines a folder's name takes on the page (`data-folder-name-lines`); 0 if unsaid.
    static func folderNameLines(_ dom: String) -> Int {
        guard let r = dom.range(of: "data-folder-name-lines=\"") else { return 0 }
        return Int(dom[r.upperBound...].prefix { $0 != "\"" }) ?? 0
    }

    static func flags(_ profile: TemporaryDirectory, _ width: Int, _ height: Int) -> [String] {
        ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(profile.path)",
         "--virtual-time-budget=5000", "--window-size=\(width),\(height)"]
    }

    /// What is wrong with the dumped page of the two-file cache.
    static func problems(_ dom: String, files: [String]) -> [String] {
        var problems: [String] = []
        // 1. The class cell of the one fetch says "waiting", not "" (code 0) or a number.
        let fetches = StatusEndpointTests.cellClasses(in: dom, table: "fetches")
        if fetches.rows.count != 1 { problems.append("\(fetches.rows.count) fetch rows, expected 1") }
        if let start = dom.range(of: "<table id=\"fetches\""), let end = dom.range(of: "</table>", range: start.upperBound..<dom.endIndex) {
            let table = dom[start.upperBound..<end.lowerBound]
            if !table.contains("<td class=\"secondary\">waiting</td>") { problems.append("the fetch's class is not \"waiting\": \(table)") }
        }
        // 2. Both folders open, both files drawn.
        if dom.components(separatedBy: "<tr class=\"folder open\"").count - 1 != 2 { problems.append("not both folders open") }
        for url in files where !dom.contains("<tr data-url=\"\(url)\"") { problems.append("no row for \(url)") }
        // 3. Each summary figure says what it counts.
        for line in ["bytes the cache holds now", "bytes readers got from the cache, since start",
                     "bytes readers got from the origin, waiting for them, since start",
                     "every byte origins sent since start: reads, read-ahead, warm-up, opens",
                     "reads answered wholly from the cache, since start", "transfers from origins running now"]
            where !dom.contains("<div class=\"hint\">\(line)</div>") {
            problems.append("no line \"\(line)\"")
        }
        // 4. The limit in force and its next change.
        if let start = dom.range(of: "<div class=\"card\" id=\"bandwidth\">"), let end = dom.range(of: "</div></div>", range: start.upperBound..<dom.endIndex) {
            let card = dom[start.upperBound..<end.upperBound]
            if !card.contains(">512.0 KiB/s<") || !card.contains("then no limit from ") { problems.append("the limit card: \(card)") }
        } else {
            problems.append("no bandwidth card")
        }
        // 5. What each kind of program cost (the player's reads, the opens' first requests), and
        //    the origin's requests.
        for row in ["<tr data-reader=\"player\">", "<tr data-reader=\"open\">", "<tr data-origin=\""] where !dom.contains(row) {
            problems.append("no row \(row)")
        }
        problems += StatusPageScaleTests.widthProblems(dom)
        // 6. (In `pictures`) the long folder name wraps at phone width, whole.
        if !problems.isEmpty { problems.append("DOM: \(dom.prefix(3000))") }
        return problems
    }

    /// The window at 1280×800 and at 390×844 (in a 390 px frame: headless Chromium lays a page
    /// out 500 px wide at least), and the whole page at each width.
    static func pictures(_ chromium: String, profile: TemporaryDirectory, page: String, name: String) throws -> [String] {
        var failures: [String] = []
        let framer = try OriginServer()
        defer { framer.stop() }
        for (width, height) in [(1280, 800), (390, 844)] {
            for (file, tall) in [("status-page-\(name)-\(width)x\(height).png", height), ("status-page-\(name)-\(width)-whole.png", 2000)] {
                let shot = TestOutput.file(file)
                try? FileManager.default.removeItem(atPath: shot)
                var target = page
                if width < 500 {
                    framer.setFile("/\(file).html", data: Array(#"<!DOCTYPE html><body style="margin:0"><iframe src="\#(page)" style="width:\#(width)px;height:\#(tall)px;border:0"></iframe>"#.utf8),
                                   contentType: "text/html")
                    target = framer.url("/\(file).html")
                }
                _ = try ExternalTool.run(chromium, flags(profile, max(width, 500), tall) + ["--screenshot=\(shot)", target], timeout: 120)
                if !FileManager.default.fileExists(atPath: shot) { failures.append("no screenshot \(shot)") }
                print("status page picture: \(shot)")
            }
        }
        return failures
    }
}
