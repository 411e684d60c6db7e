import Glibc
import XCTest
@testable import FuseMount

/// `-o uid=,gid=,umask=`: taken out of the options libfuse sees, parsed with clear errors.
final class MountOwnershipTests: XCTestCase {
    func testOwnershipOptionsLeaveTheListAndTheRestStays() throws {
        var options = ["allow_other", "uid=1234", "gid=2345", "umask=027", "max_read=131072"]
        let o = try MountOwnership.extract(from: &options)
        XCTAssertEqual(o, MountOwnership(uid: 1234, gid: 2345, umask: 0o027))
        XCTAssertEqual(options, ["allow_other", "max_read=131072"])
    }

    func testTheUmaskTakesBitsFromTheReadOnlyModes() {
        var m = MountOptions()
        XCTAssertEqual(m.fileMode, 0o444)
        XCTAssertEqual(m.directoryMode, 0o555)
        m.umask = 0o027
        XCTAssertEqual(m.fileMode, 0o440)
        XCTAssertEqual(m.directoryMode, 0o550)
        m.umask = 0o222   // write bits: nothing to take
        XCTAssertEqual(m.fileMode, 0o444)
    }

    func testNamesResolveAndBadValuesSayWhatWasExpected() throws {
        XCTAssertEqual(try MountOwnership.parseUser("root", option: "--uid"), 0)
        XCTAssertEqual(try MountOwnership.parseGroup("0", option: "--gid"), 0)
        XCTAssertEqual(try MountOwnership.parseUmask("0022", option: "--umask"), 0o022)
        for (text, fragment) in [("no-such-user-here", "invalid user 'no-such-user-here' for -o uid"),
                                 ("", "invalid user '' for -o uid"), ("4294967295", "invalid user")] {
            var options = ["uid=\(text)"]
            XCTAssertThrowsError(try MountOwnership.extract(from: &options)) { error in
                XCTAssertTrue("\(error)".contains(fragment), "\(error)")
            }
        }
        for bad in ["888", "abc", "-1", "10000", ""] {
            var options = ["umask=\(bad)"]
            XCTAssertThrowsError(try MountOwnership.extract(from: &options)) { error in
                XCTAssertTrue("\(error)".contains("expected octal permission bits"), "\(error)")
            }
        }
    }
}
