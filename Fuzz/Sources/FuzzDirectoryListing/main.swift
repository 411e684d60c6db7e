import Foundation
import FuzzSupport
@testable import FuseMount

/// Directory listings from an index URL (nginx/Apache/lighttpd HTML, nginx JSON). Invariants:
/// every entry is a name the kernel accepts (no `/`, NUL or control character, not `.`/`..`, at
/// most 255 bytes), names are unique, and each URL is under the listed directory.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDirectoryListing(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let base = input.bool() ? "http://files.example/pub/" : "https://files.example:8443/a%20b/c/"
    let bytes = input.rest
    checkJSONRuns(bytes, base: URL(string: base)!)
    guard let entries = try? DirectoryListing.parse(bytes, url: base, logger: silentLogger) else { return 0 }
    var names = Set<String>()
    for e in entries {
        fuzzCheck(DirectoryListing.rejection(of: e.name) == nil, "a name the mount cannot show: \(e.name.debugDescription)")
        fuzzCheck(!hasControlCharacter(e.name), "a control character in \(e.name.debugDescription)")
        fuzzCheck(e.name.utf8.count <= PathName.maxComponentBytes, "a name of \(e.name.utf8.count) bytes")
        fuzzCheck(names.insert(e.name).inserted, "listed twice: \(e.name.debugDescription)")
        fuzzCheck(e.url.hasPrefix(base), "\(e.url) is not under \(base)")
        fuzzCheck(e.size.map { $0 >= 0 } ?? true, "negative size for \(e.name.debugDescription)")
    }
    return 0
}

/// The runs (`JSONArrayRuns`) cut the array only between elements: one element a run decodes to
/// the same entries as the whole document, and is refused where the whole is.
func checkJSONRuns(_ bytes: [UInt8], base: URL) {
    var whole: [ListingEntry]?
    if let items = try? JSONDecoder().decode([DirectoryListing.JSONItem].self, from: Data(bytes)) {
        var made = DirectoryListing.JSONEntries(base: base, logger: silentLogger, maxEntries: .max)
        for item in items { try? made.add(item) }
        whole = made.entries
    }
    let runs = try? DirectoryListing.parseNginxJSON(bytes, base: base, logger: silentLogger, itemsPerRun: 1)
    // The whole decoder also reads UTF-16 and UTF-32 documents and skips a byte-order mark;
    // `parse` never hands it those (it takes JSON only when the first byte is "["), so they are
    // no difference that matters.
    guard bytes.first(where: { !DirectoryListing.isSpace($0) }) == UInt8(ascii: "["), !bytes.contains(0) else { return }
    fuzzCheck(runs == whole, "runs of one element gave \(runs.map { "\($0.count) entries" } ?? "a refusal"), the whole document \(whole.map { "\($0.count) entries" } ?? "a refusal")")
}
