@testable import CacheCore
import Foundation
import Proxy
import TestSupport
import XCTest

/// The status page, its JSON and `/metrics` over a real proxy: who may see them, that Prometheus
/// parses the metrics, and that a real browser draws the coverage of a partly cached file to scale.
final class StatusEndpointTests: XCTestCase {
    private static let length = 4 << 20

    /// A proxy whose cache fetches exactly what is read (no read-ahead), so coverage is known.
    private func harness(_ configuration: ProxyConfiguration = ProxyConfiguration(port: 0)) throws -> ProxyHarness {
        let h = try ProxyHarness(configuration: configuration, cache: {
            CacheConfiguration(directory: $0, freeSpaceFloor: 0, sliceSize: 1 << 20, initialReadAhead: 0, maxReadAhead: 0, engineClock: .realTime)
        })
        h.origin.setFile("/a.mp4", data: testBytes(Self.length, seed: 1))
        h.origin.setFile("/b.mp4", data: testBytes(Self.length, seed: 2))
        return h
    }

    /// A GET with this exact Host header; as the owner (with the control key) unless `key` is false.
    private func get(_ h: ProxyHarness, _ path: String, host: String = "127.0.0.1", key: Bool = true) throws -> RawHTTP.Response {
        let owner = key ? "\(ControlRequest.keyHeader): \(h.configuration.controlKey)\r\n" : ""
        let request = "GET \(path) HTTP/1.1\r\nHost: \(host)\r\n\(owner)Connection: close\r\n\r\n"
        return try RawHTTP.parse(try RawHTTP.exchange(port: h.port, send: Array(request.utf8), timeout: 20))
    }

    /// Caches `a.mp4` bytes 0..<1 MiB (25%) and `b.mp4` 0..<256 KiB (the open's probe) and
    /// 2..<2.5 MiB (18.75% in all).
    private func cachePartly(_ h: ProxyHarness) throws {
        XCTAssertEqual(try h.get(h.path("/a.mp4"), [("Range", "bytes=0-1048575")]).status, 206)
        XCTAssertEqual(try h.get(h.path("/b.mp4"), [("Range", "bytes=2097152-2621439")]).status, 206)
        // A response can end before the writer recorded its bytes: what is cached is what the
        // writer has done.
        h.engine.core.writes.waitIdle()
    }

    func testPageDocumentAndMetricsAreServedAndTheRootRedirects() throws {
        let h = try harness()
        defer { h.shutdown() }
        try cachePartly(h)

        let root = try get(h, "/")
        XCTAssertEqual(root.status, 302)
        XCTAssertEqual(root.header("Location"), "/.httpcachefs/")
        XCTAssertEqual(try get(h, "/.httpcachefs").header("Location"), "/.httpcachefs/")

        // The page at the address 'status' prints: the key in its query.
        XCTAssertEqual(try get(h, "/.httpcachefs/", key: false).status, 403)
        let page = try get(h, "/.httpcachefs/?key=\(h.configuration.controlKey)", key: false)
        XCTAssertEqual(page.status, 200)
        XCTAssertEqual(page.header("Content-Type"), "text/html; charset=utf-8")
        let html = String(decoding: page.body, as: UTF8.self)
        XCTAssertTrue(html.contains("\"status.json?\""), "the page draws the document next to it")
        XCTAssertFalse(html.contains("http://") || html.contains("https://"), "no external resources")

        let json = try get(h, "/.httpcachefs/status.json")
        XCTAssertEqual(json.status, 200)
        let doc = try StatusDocument.decode(json.body)
        XCTAssertEqual(doc.version, "test")
        XCTAssertEqual(doc.doors, [DoorInfo.proxy(bindAddress: "127.0.0.1", port: h.port, tokenRequired: false)])
        XCTAssertEqual(doc.cache.directory, h.directory.path, "a loopback client learns the directory")
        let a = try XCTUnwrap(doc.files.first { $0.url == h.origin.url("/a.mp4") })
        XCTAssertEqual(a.cachedRanges, [[0, 1 << 20]])
        XCTAssertGreaterThan(a.reads.proxy, 0, "proxy reads are counted")
        XCTAssertEqual(a.proxyPath, h.path("/a.mp4"))
        let b = try XCTUnwrap(doc.files.first { $0.url == h.origin.url("/b.mp4") })
        XCTAssertEqual(b.cachedRanges, [[0, 256 << 10], [2 << 20, (2 << 20) + (512 << 10)]])
        XCTAssertEqual(doc.totals.servedFromOrigin + doc.totals.servedFromCache, (1 << 20) + (512 << 10))

        let metrics = try get(h, "/metrics")
        XCTAssertEqual(metrics.status, 200)
        XCTAssertEqual(metrics.header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8")
        let text = String(decoding: metrics.body, as: UTF8.self)
        XCTAssertTrue(text.contains("# TYPE httpcachefs_proxy_first_byte_seconds histogram"), text)
        // One time to first byte per response; b.mp4's first bytes had to be fetched (a miss).
        let firstBytes = ["hit", "miss"].map { result in
            text.split(separator: "\n").first { $0.hasPrefix("httpcachefs_proxy_first_byte_seconds_count{result=\"\(result)\"} ") }
                .flatMap { $0.split(separator: " ").last }.flatMap { Int($0) } ?? -1
        }
        XCTAssertEqual(firstBytes[0] + firstBytes[1], 2, text)
        XCTAssertGreaterThanOrEqual(firstBytes[1], 1, text)
        XCTAssertTrue(text.contains("httpcachefs_cache_entries 2"), text)
    }

    /// Without a token the DNS-rebinding guard holds for all three: a foreign Host is refused.
    func testAForeignHostIsRefusedWithoutAToken() throws {
        let h = try harness()
        defer { h.shutdown() }
        for path in ["/", "/.httpcachefs/", "/.httpcachefs/status.json", "/metrics"] {
            XCTAssertEqual(try get(h, path, host: "evil.example:\(h.port)").status, 403, path)
            XCTAssertNotEqual(try get(h, path, host: "localhost:\(h.port)").status, 403, path)
        }
    }

    /// With a token (as beyond loopback) nothing is served without it, whatever the Host, and
    /// everything is with it, whatever the Host (a browser on the LAN names the machine's address).
    func testWithATokenNothingIsServedWithoutIt() throws {
        let token = "s3cret"
        let h = try harness(ProxyConfiguration(bindAddress: "127.0.0.1", port: 0, token: token))
        defer { h.shutdown() }
        try cachePartly(h)
        for path in ["/", "/.httpcachefs/", "/.httpcachefs/status.json", "/metrics"] {
            for host in ["127.0.0.1", "evil.example"] {
                let answer = try get(h, path, host: host)
                XCTAssertEqual(answer.status, 403, "\(path) \(host)")
                XCTAssertFalse(String(decoding: answer.body, as: UTF8.self).contains(token))
            }
            XCTAssertEqual(try get(h, "/t/wrong" + path).status, 403, path)
            XCTAssertEqual(try get(h, "/t/\(token)" + path, host: "192.168.1.20:8718").status, path == "/" ? 302 : 200, path)
        }
        XCTAssertEqual(try get(h, "/t/\(token)/").header("Location"), "/t/\(token)/.httpcachefs/")
        let doc = try StatusDocument.decode(try get(h, "/t/\(token)/.httpcachefs/status.json").body)
        XCTAssertEqual(doc.doors.first?.tokenRequired, true)
        XCTAssertEqual(doc.files.first?.proxyPath?.hasPrefix("/t/\(token)/s/"), true, "its links work for whoever holds the token")

        // The same rules in the router, for a proxy bound beyond loopback.
        let wide = ProxyRouter(configuration: ProxyConfiguration(bindAddress: "0.0.0.0", port: 8718, token: token))
        for path in ["/.httpcachefs/", "/.httpcachefs/status.json", "/metrics"] {
            guard case .reject(403, _) = wide.route(method: "GET", target: path, headerBytes: 0, host: "192.168.1.20") else {
                return XCTFail("\(path) served without the token")
            }
        }
        XCTAssertEqual(wide.route(method: "GET", target: "/t/\(token)/metrics", headerBytes: 0, host: "192.168.1.20"), .metrics(proof: .token))
        XCTAssertEqual(wide.route(method: "GET", target: "/t/\(token)/.httpcachefs/status.json", headerBytes: 0, host: "nas"),
                       .statusDocument(proof: .token))
    }

    /// Prometheus's own parser accepts a real scrape.
    func testPromtoolAcceptsARealScrape() throws {
        guard let promtool = ExternalTool.find("promtool") else {
            print("⚠️  SKIPPING promtool check: promtool not installed (Debian package prometheus)")
            throw XCTSkip("promtool not installed (Debian package prometheus)")
        }
        let h = try harness()
        defer { h.shutdown() }
        try cachePartly(h)
        XCTAssertEqual(try h.get(h.path("/missing.mp4")).status, 404)
        let scrape = String(decoding: try get(h, "/metrics").body, as: UTF8.self)
        let check = try ExternalTool.run(promtool, ["check", "metrics"], input: scrape)
        XCTAssertEqual(check.status, 0, "promtool: \(check.stdout)\(check.stderr)\n\(scrape)")
    }

    /// The page in headless Chromium: once its script has drawn status.json, each partly cached
    /// file's coverage bar has cached segments at the right places, adding up to its fraction; a
    /// fetch held open by a trickling origin is listed with its figures under their headers.
    func testABrowserDrawsCoverageToScale() throws {
        guard let chromium = ExternalTool.find("chromium", "chromium-browser", "google-chrome") else {
            print("⚠️  SKIPPING browser test: chromium not installed (Debian package chromium)")
            throw XCTSkip("chromium not installed (Debian package chromium)")
        }
        let h = try harness()
        defer { h.shutdown() }
        try cachePartly(h)
        XCTAssertEqual(try h.get(h.path("/missing.mp4")).status, 404)   // a recent error
        h.origin.setFile("/c.mp4", data: testBytes(Self.length, seed: 3))
        XCTAssertEqual(try h.get(h.path("/c.mp4"), [("Range", "bytes=0-0")]).status, 206)   // its length is known (and 256 KiB cached)
        h.origin.setFaults("/c.mp4", Faults(bytesPerSecond: 100))
        let request = Array("GET \(h.path("/c.mp4")) HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=2000000-2099999\r\nConnection: close\r\n\r\n".utf8)
        let port = h.port
        let asked = h.origin.requestCount(path: "/c.mp4")
        DispatchQueue.global().async { _ = try? RawHTTP.exchange(port: port, send: request, timeout: 120) }   // ends with the harness
        // The origin tells when the fetch reached it; the engine tracks a fetch before it starts it.
        guard h.origin.waitForRequests(path: "/c.mp4", count: asked + 1) else {
            return XCTFail("the trickled fetch never started")
        }
        XCTAssertFalse(h.engine.statusDocument(version: "test", showDirectory: false).fetches.isEmpty, "the trickled fetch is listed")
        let url = "http://127.0.0.1:\(h.port)/.httpcachefs/?key=\(h.configuration.controlKey)"
        let profile = TemporaryDirectory(prefix: "httpcachefs-chromium")
        defer { profile.remove() }
        let flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(profile.path)",
                     "--virtual-time-budget=5000", "--window-size=1280,800"]
        let dump = try ExternalTool.run(chromium, flags + ["--dump-dom", url], timeout: 120)
        let dom = dump.stdout
        var failures: [String] = []
        if dump.status != 0 { failures.append("chromium exited \(dump.status): \(dump.stderr.suffix(2000))") }
        let expected: [(String, [(Double, Double)], String)] = [
            ("/a.mp4", [(0, 25)], "25.0 %"),
            ("/b.mp4", [(0, 6.25), (50, 12.5)], "18.8 %"),
        ]
        for (path, segments, percent) in expected {
            guard let row = Self.row(in: dom, url: h.origin.url(path)) else {
                failures.append("no row for \(path)")
                continue
            }
            let drawn = Self.segments(in: row, kind: "cached")
            if drawn.count != segments.count || zip(drawn, segments).contains(where: { abs($0.0 - $1.0) > 0.01 || abs($0.1 - $1.1) > 0.01 }) {
                failures.append("\(path): cached segments \(drawn), expected \(segments)")
            }
            if !row.contains(percent) { failures.append("\(path): no '\(percent)' in its row") }
            if !Self.segments(in: row, kind: "fetching").isEmpty { failures.append("\(path): nothing is being fetched") }
        }
        if let row = Self.row(in: dom, url: h.origin.url("/c.mp4")), Self.segments(in: row, kind: "fetching").isEmpty {
            failures.append("/c.mp4: no fetching segment")
        }
        let fetches = Self.cellClasses(in: dom, table: "fetches")
        if fetches.rows.count != 1 { failures.append("fetches table: \(fetches.rows.count) rows, expected 1") }
        for row in fetches.rows where row != fetches.header {
            failures.append("fetches table: cell classes \(row) under headers \(fetches.header)")
        }
        // The error's row says its URL and its status once each (the cause names both too).
        if let start = dom.range(of: "<table id=\"errors\""), let end = dom.range(of: "</table>", range: start.upperBound..<dom.endIndex) {
            let errors = String(dom[start.upperBound..<end.lowerBound])   // text only: a tooltip repeats the URL
                .replacingOccurrences(of: #" title="[^"]*""#, with: "", options: .regularExpression)
            let missing = h.origin.url("/missing.mp4")
            // The status counted without the URL: the origin's port may hold "404" (40453).
            if errors.components(separatedBy: missing).count != 2
                || errors.replacingOccurrences(of: missing, with: "").components(separatedBy: "404").count != 2 {
                failures.append("errors table: the URL or the status repeated: \(errors)")
            }
        } else {
            failures.append("no errors table")
        }
        if !failures.isEmpty {
            let shot = NSTemporaryDirectory() + "httpcachefs-status-page-failure.png"
            _ = try? ExternalTool.run(chromium, flags + ["--screenshot=\(shot)", url], timeout: 120)
            XCTFail("status page: \(failures.joined(separator: "; ")) (screenshot: \(shot))\n\(dom.prefix(4000))")
        }
    }

    /// A name with a right-to-left override (`a\u{202E}fdp.exe` reads "aexe.pdf") is shown with
    /// the control as a visible mark, never applied.
    func testABrowserShowsBidiControlsInNamesAsMarks() throws {
        guard let chromium = ExternalTool.find("chromium", "chromium-browser", "google-chrome") else {
            print("⚠️  SKIPPING browser test: chromium not installed (Debian package chromium)")
            throw XCTSkip("chromium not installed (Debian package chromium)")
        }
        let h = try harness()
        defer { h.shutdown() }
        let path = "/a%E2%80%AEfdp.exe"
        h.origin.setFile(path, data: testBytes(1000))
        XCTAssertEqual(try h.get(h.path(path)).status, 200)
        let doc = try StatusDocument.decode(try h.owner("/.httpcachefs/status.json").body)
        XCTAssertTrue(doc.files.contains { $0.name.contains("\u{202E}") }, "the document carries the name as it is")
        let profile = TemporaryDirectory(prefix: "httpcachefs-chromium")
        defer { profile.remove() }
        let flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(profile.path)",
                     "--virtual-time-budget=5000", "--window-size=1280,800"]
        let dom = try ExternalTool.run(chromium, flags + ["--dump-dom", "http://127.0.0.1:\(h.port)/.httpcachefs/?key=\(h.configuration.controlKey)"], timeout: 120).stdout
        XCTAssertTrue(dom.contains("a[U+202E]fdp.exe"), String(dom.prefix(4000)))
        XCTAssertFalse(dom.replacingOccurrences(of: "%E2%80%AE", with: "").contains("\u{202E}"), "no raw override in the page")
    }

    /// The page answers at a glance, in Chromium at desktop (1280×800) and phone (390×844) width:
    /// folders grouped by origin (two `index.m3u8` in two folders), a listing counted in its folder,
    /// a banner for the recent error, and a page opened at `#URL` with that row's details
    /// open and scrolled to. Screenshots of both widths (and of the deep link at phone width) go
    /// to `TestOutput.directory`, their paths printed, for a person to look at.
    func testTheBrowserShowsGroupsListingsABannerAndDeepLinksAtBothWidths() throws {
        guard let chromium = ExternalTool.find("chromium", "chromium-browser", "google-chrome") else {
            print("⚠️  SKIPPING browser test: chromium not installed (Debian package chromium)")
            throw XCTSkip("chromium not installed (Debian package chromium)")
        }
        let h = try harness()
        defer { h.shutdown() }
        try cachePartly(h)
        let playlist = Array("#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\nseg000.ts\n#EXT-X-ENDLIST\n".utf8)
        for folder in ["/shows/a/", "/shows/b/"] {
            h.origin.setFile(folder + "index.m3u8", data: playlist, contentType: "application/vnd.apple.mpegurl")
            h.origin.setFile(folder + "seg000.ts", data: testBytes(200_000, seed: 9), contentType: "video/mp2t")
            XCTAssertEqual(try h.get(h.path(folder + "index.m3u8")).status, 200)
            XCTAssertEqual(try h.get(h.path(folder + "seg000.ts")).status, 200)
        }
        h.origin.setFile("/shows/", data: Array("<html><body><a href=\"a/\">a/</a><a href=\"b/\">b/</a></body></html>".utf8),
                         contentType: "text/html")
        XCTAssertEqual(try h.get(h.path("/shows/")).status, 200)
        XCTAssertEqual(try h.get(h.path("/shows/missing.mp4")).status, 404)   // a recent error
        h.engine.core.writes.waitIdle()

        let doc = h.engine.statusDocument(version: "test", showDirectory: false)
        let listing = try XCTUnwrap(doc.files.first { $0.url == h.origin.url("/shows/") })
        XCTAssertEqual(listing.kind, "listing")
        let b = try XCTUnwrap(doc.files.first { $0.url == h.origin.url("/shows/b/index.m3u8") })
        XCTAssertEqual(b.kind, "file")
        XCTAssertEqual(b.folder, "/shows/b/")
        XCTAssertEqual(b.origin, h.origin.url(""))

        let page = "http://127.0.0.1:\(h.port)/.httpcachefs/?key=\(h.configuration.controlKey)"
        let deepLink = page + "#" + (b.url.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? b.url)
        let profile = TemporaryDirectory(prefix: "httpcachefs-chromium")
        defer { profile.remove() }
        func flags(_ width: Int, _ height: Int) -> [String] {
            ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(profile.path)",
             "--virtual-time-budget=5000", "--window-size=\(width),\(height)"]
        }
        var failures: [String] = []
        for (width, height) in [(1280, 800), (390, 844)] {
            let dump = try ExternalTool.run(chromium, flags(width, height) + ["--dump-dom", deepLink], timeout: 120)
            if dump.status != 0 { failures.append("\(width): chromium exited \(dump.status): \(dump.stderr.suffix(2000))") }
            failures += Self.pageProblems(dump.stdout, origin: h.origin, deepLinked: b.url).map { "\(width)×\(height): \($0)" }
            // Headless Chromium paints a page it scrolled as blank: the deep link's picture is taken
            // in a window tall enough to show its open details without scrolling.
            for (name, url, tall) in [("status-page-\(width)x\(height).png", page, height),
                                      ("status-page-\(width)-deep-link-details.png", deepLink, 2000)] {
                let shot = TestOutput.file(name)
                try? FileManager.default.removeItem(atPath: shot)
                _ = try ExternalTool.run(chromium, flags(width, tall) + ["--screenshot=\(shot)", url], timeout: 120)
                if !FileManager.default.fileExists(atPath: shot) { failures.append("no screenshot \(shot)") }
            }
        }
        XCTAssertTrue(failures.isEmpty, failures.joined(separator: "\n"))
    }

    /// What is wrong with a dumped status page that was opened at `#deepLinked`.
    static func pageProblems(_ dom: String, origin: OriginServer, deepLinked: String) -> [String] {
        var problems: [String] = []
        // The folders' table up to the doors' heading: an open folder's files are a table within it.
        let files: String = {
            guard let start = dom.range(of: "<table id=\"folders\""),
                  let end = dom.range(of: "<h2>Doors</h2>", range: start.upperBound..<dom.endIndex) else { return "" }
            return String(dom[start.lowerBound..<end.lowerBound])
        }()
        if !files.contains("<tr class=\"origin\" data-origin=\"\(origin.url(""))\"") { problems.append("no group for the origin") }
        for folder in ["/", "/shows/", "/shows/a/", "/shows/b/"] where !files.contains("data-folder=\"\(folder)\"") {
            problems.append("no folder row \(folder)")
        }
        // A cache of at most 50 files shows every folder open: each index.m3u8 is drawn under
        // its folder's row.
        if !files.contains("<tr data-url=\"\(origin.url("/shows/b/index.m3u8"))\"") { problems.append("no file row /shows/b/index.m3u8") }
        if !files.contains("data-url=\"\(origin.url("/shows/a/index.m3u8"))\"") { problems.append("a small cache's folder is not open") }
        if let a = files.range(of: "data-folder=\"/shows/a/\""), let b = files.range(of: "data-folder=\"/shows/b/\""),
           let fb = files.range(of: "data-url=\"\(origin.url("/shows/b/index.m3u8"))\"") {
            if !(a.lowerBound < b.lowerBound && b.lowerBound < fb.lowerBound) { problems.append("the folders are not in order, or the file not under its folder") }
        }
        // The listing is counted as a listing of its folder, not as a file (the listings in a
        // part of the cell that phone width hides).
        if let row = files.range(of: "data-folder=\"/shows/\""), let end = files.range(of: "</tr>", range: row.upperBound..<files.endIndex),
           !files[row.upperBound..<end.lowerBound].contains(">0<span class=\"secondary\"> + 1 listing</span>") {
            problems.append("the folder of the listing does not count it as one")
        }
        if !dom.contains("<div class=\"banner errors\"") || !dom.contains("1 error in the last") {
            problems.append("no error banner")
        }
        if let banner = dom.range(of: "id=\"banners\""), let cards = dom.range(of: "id=\"cards\""), banner.lowerBound > cards.lowerBound {
            problems.append("the banner is not at the top")
        }
        if !dom.contains("data-detail-of=\"\(deepLinked)\"") { problems.append("the deep-linked row's details are not open") }
        if !dom.contains("data-scrolled-to=\"\(deepLinked)\"") { problems.append("the page did not scroll to the deep-linked row") }
        func number(_ attribute: String) -> Int? {
            guard let r = dom.range(of: "\(attribute)=\"") else { return nil }
            return Int(dom[r.upperBound...].prefix { $0 != "\"" })
        }
        if let top = number("data-row-top"), let height = number("data-view-height") {
            if !(0..<height).contains(top) { problems.append("the deep-linked row is at \(top) px, outside the window's \(height) px") }
        } else {
            problems.append("no row position recorded")
        }
        if !problems.isEmpty { problems.append("DOM: \(dom.prefix(3000))") }
        return problems
    }

    /// The `<tr data-url="URL">` element of the dumped DOM.
    static func row(in dom: String, url: String) -> String? {
        guard let start = dom.range(of: "<tr data-url=\"\(url)\"") else { return nil }
        guard let end = dom.range(of: "</tr>", range: start.upperBound..<dom.endIndex) else { return nil }
        return String(dom[start.lowerBound..<end.upperBound])
    }

    /// The class of each header cell of `<table id="TABLE">`, and of each body row's cells, so a
    /// right-aligned header can be checked to stand over right-aligned figures.
    static func cellClasses(in dom: String, table: String) -> (header: [String], rows: [[String]]) {
        guard let start = dom.range(of: "<table id=\"\(table)\""),
              let end = dom.range(of: "</table>", range: start.upperBound..<dom.endIndex) else { return ([], []) }
        let html = String(dom[start.lowerBound..<end.lowerBound])
        func classes(_ tag: String, in text: String) -> [String] {
            guard let regex = try? NSRegularExpression(pattern: "<\(tag)(?=[ >])(?: [^>]*?class=\"([^\"]*)\")?[^>]*>") else { return [] }
            let ns = text as NSString
            return regex.matches(in: text, range: NSRange(location: 0, length: ns.length)).map { m in
                m.range(at: 1).location == NSNotFound ? "" : ns.substring(with: m.range(at: 1))
            }
        }
        let parts = html.components(separatedBy: "<tbody>")
        let rows = parts.count > 1 ? parts[1].components(separatedBy: "</tr>").filter { $0.contains("<td") } : []
        return (classes("th", in: parts[0]), rows.map { classes("td", in: $0) })
    }

    /// (left, width) in percent of each `seg KIND` element, in order.
    static func segments(in html: String, kind: String) -> [(Double, Double)] {
        let pattern = "class=\"seg \(kind)\" style=\"left:\\s*([-0-9.e]+)%;\\s*width:\\s*([-0-9.e]+)%;?\""
        guard let regex = try? NSRegularExpression(pattern: pattern) else { return [] }
        let ns = html as NSString
        return regex.matches(in: html, range: NSRange(location: 0, length: ns.length)).compactMap { m in
            guard let left = Double(ns.substring(with: m.range(at: 1))), let width = Double(ns.substring(with: m.range(at: 2))) else { return nil }
            return (left, width)
        }
    }
}
