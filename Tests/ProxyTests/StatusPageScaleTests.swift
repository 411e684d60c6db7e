import CacheCore
import Foundation
import Logging
import Proxy
import TestSupport
import XCTest

/// The status page over a library of 10k files in headless Chromium, at desktop and phone width:
/// what is happening (a banner, the fetches and errors) comes before the files; the 40 folders
/// are rows with their totals; a deep link opens one folder on the page of its files that holds
/// the file (one page: at most 100 rows); nothing is wider than the window. Screenshots of both
/// widths go to `TestOutput.directory`, their paths printed, for a person to look at.
final class StatusPageScaleTests: XCTestCase {
    func testTenThousandFilesDrawAsFoldersWithWhatIsHappeningFirstAtBothWidths() async throws {
        guard let chromium = ExternalTool.find("chromium", "chromium-browser", "google-chrome") else {
            print("⚠️  SKIPPING browser test: chromium not installed (Debian package chromium)")
            throw XCTSkip("chromium not installed (Debian package chromium)")
        }
        let library = try await StatusViewsTests.Library(paths: StatusViewsTests.paths(files: 10_000, folders: 40))
        defer { library.close() }
        do { _ = try await library.engine.open(url: StatusViewsTests.Library.origin + "/show01/missing.mkv") } catch {}   // a recent error
        let server = ProxyServer(engine: library.engine, configuration: ProxyConfiguration(port: 0), logger: Logger(label: "status-scale"))
        let port = try server.start()
        defer { server.stop() }

        let target = StatusViewsTests.Library.origin + "/show07/e0100.mkv"
        let page = "http://127.0.0.1:\(port)/.httpcachefs/"
        let deepLink = page + "#" + (target.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? target)
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
            failures += Self.problems(dump.stdout, deepLinked: target).map { "\(width)×\(height): \($0)" }
            let shot = TestOutput.file("status-page-10k-\(width)x\(height).png")
            try? FileManager.default.removeItem(atPath: shot)
            _ = try ExternalTool.run(chromium, flags(width, height) + ["--screenshot=\(shot)", page], timeout: 120)
            if !FileManager.default.fileExists(atPath: shot) { failures.append("no screenshot \(shot)") }
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
        if !dom.contains("10000 files") { problems.append("the origin's row does not count 10000 files") }
        let fileRows = dom.components(separatedBy: "<tr data-url=").count - 1
        if !(1...100).contains(fileRows) { problems.append("\(fileRows) file rows, expected one page (1 to 100)") }
        if !dom.contains("<tr data-url=\"\(deepLinked)\"") { problems.append("the deep-linked file's row is not drawn") }
        if !dom.contains("data-detail-of=\"\(deepLinked)\"") { problems.append("the deep-linked row's details are not open") }
        if !dom.contains("page 2 of 3") { problems.append("the pager does not say page 2 of 3") }
        func number(_ attribute: String) -> Int? {
            guard let r = dom.range(of: "\(attribute)=\"") else { return nil }
            return Int(dom[r.upperBound...].prefix { $0 != "\"" })
        }
        if let drawn = number("data-page-width"), let window = number("data-view-width") {
            if drawn > window { problems.append("the page is \(drawn) px wide in a \(window) px window") }
        } else {
            problems.append("no page width recorded")
        }
        if !problems.isEmpty { problems.append("DOM: \(dom.prefix(3000))") }
        return problems
    }
}
