import XCTest
@testable import FuseMount

final class MountOptionsTests: XCTestCase {
    func testTheMountIsAlwaysReadOnlyWithKernelPermissionChecksAndLargeReads() {
        let o = MountOptions(fuseOptions: ["allow_other", "rw"]).libfuseOptions
        XCTAssertEqual(o, ["fsname=httpcachefs", "subtype=httpcachefs", "ro", "default_permissions", "max_read=1015808", "allow_other"])
    }

    /// libfuse's sizing of the pipe it splices a reply through (fuse_send_data_iov): a page per
    /// iovec and per piece, one more, and the reply with its 16-byte header. Past the 1 MiB a
    /// pipe may grow to without CAP_SYS_RESOURCE, it copies through user space instead.
    func testAFullReadOfUpToFivePiecesFitsTheSplicePipe() {
        let page = 4096, header = 16, pieces = 5
        let pipe = page * (1 + pieces + 1) + header + MountOptions.defaultMaxRead
        XCTAssertLessThanOrEqual(pipe, 1 << 20)
        XCTAssertEqual(MountOptions.defaultMaxRead % page, 0, "whole pages, as the kernel's readahead sends them")
    }

    func testAUsersMaxReadReplacesOursAndIsWhatInitAnnounces() {
        let o = MountOptions(fuseOptions: ["max_read=131072"])
        XCTAssertEqual(o.libfuseOptions.filter { $0.hasPrefix("max_read=") }, ["max_read=131072"])
        XCTAssertEqual(o.effectiveMaxRead, 131_072)
    }

    func testOptionListsSplitOnCommas() {
        XCTAssertEqual(MountOptions.splitOptionList("allow_other, ,uid=0,"), ["allow_other", "uid=0"])
    }

    func testListingsAreTrustedAsLongAsFilesByDefault() {
        XCTAssertEqual(MountOptions(revalidateAfter: 42).listingTTL, MountOptions.defaultListingTTL)
        XCTAssertEqual(MountOptions(revalidateAfter: 42, listingTTL: 5).listingTTL, 5)
    }
}

final class MountpointTests: XCTestCase {
    func testMountinfoLinesWithEscapedSpaces() {
        let e = Mountpoint.parseMountinfoLine("36 35 0:52 / /mnt/my\\040media rw,nosuid shared:1 - fuse.httpcachefs httpcachefs rw,user_id=0")
        XCTAssertEqual(e, Mountpoint.Entry(device: "0:52", path: "/mnt/my media", fsType: "fuse.httpcachefs", source: "httpcachefs"))
        XCTAssertNil(Mountpoint.parseMountinfoLine("garbage"))
    }

    func testAbsolutePathsAreNormalisedWithoutTouchingTheFileSystem() {
        XCTAssertEqual(Mountpoint.absolute("/a/./b/../c/"), "/a/c")
        XCTAssertTrue(Mountpoint.absolute("rel").hasSuffix("/rel"))
    }

    func testMissingAndNonDirectoryMountpointsAreRefused() throws {
        try requireFuse()
        XCTAssertThrowsError(try Mountpoint.prepare("/nonexistent-\(UUID().uuidString)")) { error in
            guard case .missing? = error as? MountpointError else { return XCTFail("\(error)") }
        }
        XCTAssertThrowsError(try Mountpoint.prepare("/etc/hostname")) { error in
            guard case .notADirectory? = error as? MountpointError else { return XCTFail("\(error)") }
        }
    }
}
