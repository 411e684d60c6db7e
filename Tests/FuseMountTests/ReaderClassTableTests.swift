import CacheCore
import XCTest
@testable import FuseMount

/// Which class a process falls in, by its `comm` and its executable's name, and what
/// `--scanner` / `--background-reader` (and the config keys) add, with a clear error for a name
/// that cannot be a process's.
final class ReaderClassTableTests: XCTestCase {
    let table = ReaderClassTable.builtIn

    func testBuiltInClassesByCommOrExecutable() {
        let cases: [(comm: String, exe: String?, expected: ReaderClass)] = [
            ("ffprobe", "ffprobe", .scanner),
            ("mediainfo", nil, .scanner),
            ("exiftool", "perl", .scanner),                          // a script: comm is the script's name
            ("Plex Media Scan", "Plex Media Scanner", .scanner),
            ("Plex Media Scan", nil, .scanner),                      // comm keeps 15 bytes of a longer name
            ("minidlnad", "minidlnad", .scanner),
            ("gerbera", "gerbera", .scanner),
            ("mpv", "mpv", .player),
            ("vo", "mpv", .player),                                  // a thread of mpv, named otherwise
            ("cat", "cat", .player),
            ("ffmpegthumbnail", "ffmpegthumbnailer", .background),
            ("bash", "bash", .unknown),
            ("FFprobe", "FFprobe", .unknown),                        // names are exact
            ("", nil, .unknown),
        ]
        for c in cases {
            XCTAssertEqual(table.classify(comm: c.comm, executable: c.exe), c.expected, "\(c.comm) / \(c.exe ?? "-")")
        }
    }

    func testOptionsAddNamesAndTheLastWordWins() throws {
        var t = table
        try t.add("my-probe, Emby Media Scanner ", as: .scanner, option: "--scanner")
        try t.add("subextract", as: .background, option: "--background-reader")
        try t.add("mpv", as: .background, option: "--background-reader")
        XCTAssertEqual(t.classify(comm: "my-probe", executable: nil), .scanner)
        XCTAssertEqual(t.classify(comm: "Emby Media Scan", executable: nil), .scanner, "spaces kept inside a name")
        XCTAssertEqual(t.classify(comm: "subextract", executable: nil), .background)
        XCTAssertEqual(t.classify(comm: "mpv", executable: "mpv"), .background, "a configured name overrides the built-in class")
        XCTAssertEqual(t.classify(comm: "ffprobe", executable: nil), .scanner, "the built-in ones stay")
    }

    func testBadNamesAreRefusedWithWhatToDo() {
        var t = table
        let bad: [(String, String)] = [
            ("ffprobe,,mediainfo", "empty process name"),
            ("", "empty process name"),
            ("/usr/bin/ffprobe", "is a path"),
            ("tab\there", "no control characters"),
            (String(repeating: "x", count: 300), "at most 255 bytes"),
        ]
        for (text, why) in bad {
            XCTAssertThrowsError(try t.add(text, as: .scanner, option: "--scanner"), text) { error in
                let message = (error as? ReaderClassError)?.message ?? ""
                XCTAssertTrue(message.contains("for --scanner"), message)
                XCTAssertTrue(message.contains(why), message)
                XCTAssertFalse(message.contains("\n"), "one line: \(message)")
            }
        }
        XCTAssertEqual(t, table, "a refused list adds nothing")
    }

    func testThisProcessIsReadFromProc() throws {
        let me = try XCTUnwrap(ProcessName.of(pid: getpid()))
        XCTAssertFalse(me.comm.isEmpty)
        XCTAssertFalse(me.comm.hasSuffix("\n"))
        XCTAssertNotNil(me.executable)
        XCTAssertNil(ProcessName.of(pid: -1))
    }
}
