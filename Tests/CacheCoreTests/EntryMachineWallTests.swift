import XCTest

/// The walls around an entry's state. The compiler keeps every write to the machine's state inside
/// the EntryMachine module (its setters are the module's own); the one write it cannot refuse,
/// replacing an entry's whole machine, no CacheCore file makes (`scripts/entry-writes.sh`).
final class EntryMachineWallTests: XCTestCase {
    func testNoFileReplacesAnEntrysMachine() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let script = root.appendingPathComponent("scripts/entry-writes.sh").path
        try XCTSkipUnless(FileManager.default.fileExists(atPath: script), "no source tree beside the tests")
        let run = Process()
        run.executableURL = URL(fileURLWithPath: "/bin/sh")
        run.arguments = [script]
        let out = Pipe()
        run.standardOutput = out
        try run.run()
        let found = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        run.waitUntilExit()
        XCTAssertEqual(run.terminationStatus, 0, "an entry's machine replaced outside EntryState's init:\n\(found)")
    }
}
