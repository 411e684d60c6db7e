import CacheCore
import Foundation
import Logging
import Proxy
import TestSupport
import XCTest

/// The status page over a library of 10k files in headless Chromium, at desktop and phone width
/// (500 px: headless Chromium's narrowest layout; pictures at 390 px in a frame):
/// what is happening (a banner, the fetches and errors) comes before the files; the 40 folders
/// are rows with their totals; a deep link opens one folder on the page of its files that holds
/// the file (one page: at most 100 rows); names with markup or bidi controls are drawn inert and
/// marked; nothing is wider than the window. Screenshots of both
/// widths go to `TestOutput.directory`, their paths printed, for a person to look at.
final class StatusPageScaleTests: XCTestCase {
    func testTenThousandFilesDrawAsFoldersWithWhatIsHappeningFirstAtBothWidths() async throws {
        guard let chromium = ExternalTool.find("chromium", "chromium-browser", "google-chrome") else {
            print("⚠️  SKIPPING browser test: chromium not installed (Debian package chromium)")
            throw XCTSkip("chromium not installed (Debian package chromium)")
        }
        // Two hostile names on the deep link's page: markup, and a character that reorders text.
        let hostile = ["/show07/e0150%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E.mkv", "/show07/e0151%E2%80%AEvkm.exe"]
        let library = try await StatusViewsTests.Library(paths: StatusViewsTests.paths(files: 10_000, folders: 40) + hostile)
        defer { library.close() }
        do { _ = try await library.engine.open(url: StatusViewsTests.Library.origin + "/show01/missing.mkv") } catch {}   // a recent error
        // Two mounts of the daemon: one of the whole library, one of a single show.
        library.engine.metrics.addDoor(.mount("/mnt/library", urls: [StatusViewsTests.Library.origin + "/"]))
        library.engine.metrics.addDoor(.mount("/mnt/one show", urls: [StatusViewsTests.Library.origin + "/show07/"]))
        let configuration = ProxyConfiguration(port: 0)
        let server = ProxyServer(engine: library.engine, configuration: configuration, logger: Logger(label: "status-scale"))
        let port = try server.start()
        defer { server.stop() }

        let target = StatusViewsTests.Library.origin + "/show07/e0100.mkv"
        let page = "http://127.0.0.1:\(port)/.httpcachefs/?key=\(configuration.controlKey)"
        let deepLink = page + "#" + (target.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? target)
        let profile = TemporaryDirectory(prefix: "httpcachefs-chromium")
        defer { profile.remove() }
        func flags(_ width: Int, _ height: Int) -> [String] {
            ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=\(profile.path)",
             "--virtual-time-budget=5000", "--window-size=\(width),\(height)"]
        }
        var failures: [String] = []
        // Headless Chromium lays a page out at least 500 px wide whatever --window-size says (a
        // "390 px" screenshot is a 500 px layout cut at 390): the DOM is checked at 500, which
        // is phone layout (<= 720 px) too, and the pictures at 390 are taken of the page in a
        // 390 px frame, which lays it out at that width.
        // The frame's page comes over loopback HTTP (a file:// page's frame may not fetch from
        // loopback: its status.json would never come).
        let framer = try OriginServer()
        defer { framer.stop() }
        for (width, height) in [(1280, 800), (500, 844)] {
            let dump = try ExternalTool.run(chromium, flags(width, height) + ["--dump-dom", deepLink], timeout: 120)
            if dump.status != 0 { failures.append("\(width): chromium exited \(dump.status): \(dump.stderr.suffix(2000))") }
            failures += Self.problems(dump.stdout, deepLinked: target).map { "\(width)×\(height): \($0)" }
            // Every folder collapsed: no file row, and no sideways scrolling either.
            let collapsed = try ExternalTool.run(chromium, flags(width, height) + ["--dump-dom", page], timeout: 120).stdout
            if collapsed.contains("<tr data-url=") { failures.append("\(width)×\(height): a file row with every folder collapsed") }
            failures += Self.widthProblems(collapsed).map { "\(width)×\(height), collapsed: \($0)" }
            // Filtered (`?filter=`, as the box keeps it): only the folders with a match, counting
            // only the matches (e0010…e0019 of each folder's 250).
            let filtered = try ExternalTool.run(chromium, flags(width, height) + ["--dump-dom", page + "&filter=E001"], timeout: 120).stdout
            let shownFolders = filtered.components(separatedBy: "<tr class=\"folder").count - 1 - (filtered.components(separatedBy: "<tr class=\"folder-files").count - 1)
            if shownFolders != 40 || !filtered.contains("400 files") || !filtered.contains("40 folders with matches") {
                failures.append("\(width)×\(height), filtered: \(shownFolders) folder rows; DOM: \(filtered.prefix(2000))")
            }
            let none = try ExternalTool.run(chromium, flags(width, height) + ["--dump-dom", page + "&filter=no-such-name"], timeout: 120).stdout
            if !none.contains("No file matches the filter.") { failures.append("\(width)×\(height): a filter matching nothing does not say so") }
            // The view of one mount (the choice sets the filter to the URL it serves): its one folder.
            let show = StatusViewsTests.Library.origin + "/show07/"
            let mount = try ExternalTool.run(chromium, flags(width, height) + ["--dump-dom", page + "&filter=" + (show.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? show)],
                                             timeout: 120).stdout
            let mountFolders = mount.components(separatedBy: "<tr class=\"folder").count - 1 - (mount.components(separatedBy: "<tr class=\"folder-files").count - 1)
            if mountFolders != 1 || !mount.contains("data-folder=\"/show07/\"") { failures.append("\(width)×\(height), one mount: \(mountFolders) folder rows") }
            failures += Self.widthProblems(mount).map { "\(width)×\(height), one mount: \($0)" }
        }
        // The window, and the whole page (every folder row, or the deep link's open folder) in a
        // window tall enough for it; at 390 px in a frame of that width.
        for (width, height) in [(1280, 800), (390, 844)] {
            for (name, url, tall) in [("status-page-10k-\(width)x\(height).png", page, height), ("status-page-10k-\(width)-whole.png", page, 2400),
                                      ("status-page-10k-\(width)-deep-link.png", deepLink, 3000)] {
                let shot = TestOutput.file(name)
                try? FileManager.default.removeItem(atPath: shot)
                var target = url
                if width < 500 {
                    framer.setFile("/\(name).html", data: Array(#"<!DOCTYPE html><body style="margin:0"><iframe src="\#(url)" style="width:\#(width)px;height:\#(tall)px;border:0"></iframe>"#.utf8),
                                   contentType: "text/html")
                    target = framer.url("/\(name).html")
                }
                _ = try ExternalTool.run(chromium, flags(max(width, 500), tall) + ["--screenshot=\(shot)", target], timeout: 120)
                if !FileManager.default.fileExists(atPath: shot) { failures.append("no screenshot \(shot)") }
                print("status page picture: \(shot)")
            }
        }
        XCTAssertTrue(failures.isEmpty, failures.joined(separator: "\n"))
    }

    /// What is wrong with the dumped page of the 10k library opened at `#deepLinked`.
    static func problems(_ dom: String, deepLinked: String) -> [String] {
        var problems: [String] = []
        func at(_ s: String) -> String.Index? { dom.range(of: s)?.lowerBound }
        if let banners = at("id=\"banners\""), let now = at("id=\"now\""), let folders = at("id=\"folders\"") {
            if !(banners < now && now < folders) { problems.append("the banners and what is happening do not come before the files") }
        } else {
            problems.append("no banners, #now or #folders")
        }
        if !dom.contains("1 error in the last") { problems.append("no error banner") }
        if let errors = dom.range(of: "<table id=\"errors\""), let end = dom.range(of: "</table>", range: errors.upperBound..<dom.endIndex),
           !dom[errors.upperBound..<end.lowerBound].contains("missing.mkv") {
            problems.append("the error is not in the recent errors")
        }
        let folderRows = dom.components(separatedBy: "<tr class=\"folder").count - 1 - (dom.components(separatedBy: "<tr class=\"folder-files").count - 1)
        if folderRows != 40 { problems.append("\(folderRows) folder rows, expected 40") }
        if !dom.contains("<tr class=\"origin\" data-origin=\"\(StatusViewsTests.Library.origin)\"") { problems.append("no group for the origin") }
        if !dom.contains("10002 files") { problems.append("the origin's row does not count 10002 files") }
        // The view by mountpoint: a choice of each mount, and each folder names the mounts serving it.
        for option in ["<option value=\"\(StatusViewsTests.Library.origin)/\">Mount /mnt/library</option>",
                       "<option value=\"\(StatusViewsTests.Library.origin)/show07/\">Mount /mnt/one show</option>"] where !dom.contains(option) {
            problems.append("no choice \(option)")
        }
        if !dom.contains(">in /mnt/library, /mnt/one show</span>") { problems.append("show07 does not name both mounts serving it") }
        if !dom.contains(">in /mnt/library</span>") { problems.append("the other folders do not name the library's mount") }
        // What each kind of program cost, and the origin's requests.
        if !dom.contains("<table id=\"readers\"") || !dom.contains("<table id=\"origins\"") { problems.append("no readers or origins table") }
        // Names go in as text: the markup is shown, not made; the reordering character is a mark.
        if dom.contains("<img") || !dom.contains("e0150&lt;img src=x onerror=alert(1)&gt;.mkv") { problems.append("a name's markup was not shown as text") }
        if dom.contains("\u{202E}") || !dom.contains("e0151[U+202E]vkm.exe") {
            problems.append("the bidi control in a name is not shown as a mark")
        }
        let fileRows = dom.components(separatedBy: "<tr data-url=").count - 1
        if !(1...100).contains(fileRows) { problems.append("\(fileRows) file rows, expected one page (1 to 100)") }
        if !dom.contains("<tr data-url=\"\(deepLinked)\"") { problems.append("the deep-linked file's row is not drawn") }
        if !dom.contains("data-detail-of=\"\(deepLinked)\"") { problems.append("the deep-linked row's details are not open") }
        // Scrolled down to the row, not sideways: the names on the left stay in sight.
        if dom.contains("data-scrolled-to=") && !dom.contains("data-scrolled-sideways=\"0\"") {
            problems.append("the deep link scrolled the page sideways")
        }
        if !dom.contains("page 2 of 3") { problems.append("the pager does not say page 2 of 3") }
        problems += widthProblems(dom)
        if !problems.isEmpty { problems.append("DOM: \(dom.prefix(3000))") }
        return problems
    }

    /// The page is drawn wider than its window (it would scroll sideways).
    static func widthProblems(_ dom: String) -> [String] {
        var problems: [String] = []
        func number(_ attribute: String) -> Int? {
            guard let r = dom.range(of: "\(attribute)=\"") else { return nil }
            return Int(dom[r.upperBound...].prefix { $0 != "\"" })
        }
        if let drawn = number("data-page-width"), let window = number("data-view-width") {
            if drawn > window {
                let culprit = dom.range(of: "data-too-wide=\"").map { String(dom[$0.upperBound...].prefix { $0 != "\"" }) } ?? "?"
                problems.append("the page is \(drawn) px wide in a \(window) px window (first too wide: \(culprit))")
            }
        } else {
            problems.append("no page width recorded")
        }
        return problems
    }
}
