import CacheCore
import Glibc
import Logging
import XCTest
@testable import FuseMount
import TestSupport

/// libfuse's complaints, as the user reads them.
final class FuseLogTests: XCTestCase {
    override func tearDown() { FuseLog.clear() }

    func testAMessageLibfusePrintsInPiecesArrivesAsOneLine() {
        FuseLog.clear()
        // What fuse_session_new logs for `-o bogus_opt -o other`: one call per piece.
        for piece in ["fuse: unknown option(s): `", "-o bogus_opt ", "-o other", "'\n"] {
            FuseLog.receive(piece, error: true)
        }
        XCTAssertEqual(FuseLog.lastMessages(), "fuse: unknown option(s): `-o bogus_opt -o other'")
    }

    func testAnUnfinishedLineIsStillReported() {
        FuseLog.clear()
        FuseLog.receive("first\n", error: true)
        FuseLog.receive("no newline yet", error: true)
        XCTAssertEqual(FuseLog.lastMessages(), "first; no newline yet")
    }

    func testUnknownOptionsAreNamedWithoutLibfusesPunctuation() {
        let error = FuseMountError.sessionFailed(options: "fsname=x,ro,bogus_opt",
                                                 detail: "fuse: unknown option(s): `-o bogus_opt -o other'")
        XCTAssertEqual(FuseMountError.unknownOptions(in: "fuse: unknown option(s): `-o bogus_opt -o other'"), ["bogus_opt", "other"])
        XCTAssertTrue("\(error)".hasPrefix("unknown mount options 'bogus_opt', 'other' (given with -o)"), "\(error)")
        let other = FuseMountError.sessionFailed(options: "ro", detail: "fuse: something else")
        XCTAssertEqual("\(other)", "libfuse refused the options 'ro': fuse: something else")
    }

    func testWhatFusermountSaysOnStderrBecomesTheReason() {
        let (rc, said) = FuseSession.capturingFusermountOutput { () -> Int32 in
            let text = "fusermount3: option allow_other only allowed if 'user_allow_other' is set in /etc/fuse.conf\nunrelated\n"
            _ = text.withCString { write(2, $0, strlen($0)) }
            return -1
        }
        XCTAssertEqual(rc, -1)
        XCTAssertEqual(said, "fusermount3: option allow_other only allowed if 'user_allow_other' is set in /etc/fuse.conf")
        let (_, nothing) = FuseSession.capturingFusermountOutput { 0 }
        XCTAssertEqual(nothing, "")
    }

    func testTheSessionRefusesAnUnknownOptionBeforeMounting() throws {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let fs = FuseFileSystem(backend: FakeBackend(), tree: MountTreeSpec(byURL: true),
                                options: MountOptions(fuseOptions: ["bogus_opt"]), clock: .realTime, logger: logger)
        XCTAssertThrowsError(try fs.mount(at: "/nonexistent-mountpoint")) { error in
            XCTAssertTrue("\(error)".hasPrefix("unknown mount option 'bogus_opt' (given with -o)"), "\(error)")
        }
    }
}
