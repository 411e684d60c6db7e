import XCTest
@testable import Settings

/// `--header` lines as the origin will see them, and the one header no fetch ever sends.
final class HeaderLineTests: XCTestCase {
    func testHeaderLinesAreCheckedAndTheControlKeyHeaderIsRefused() {
        let cases: [(String, Result<String, UsageError>)] = [
            ("Authorization: Bearer x", .success("Authorization: Bearer x")),
            ("  X-Custom :  v  ", .success("X-Custom: v")),
            ("NoColon", .failure(UsageError("invalid header 'NoColon' for --header: expected 'Name: value'"))),
            // A daemon's control key would prove its owner to whatever proxy a fetch reaches.
            ("X-Httpcachefs-Control: k3y", .failure(UsageError("invalid header 'X-Httpcachefs-Control' for --header: it carries a daemon's control key, which is never sent with a fetch"))),
            ("x-httpcachefs-control:k3y", .failure(UsageError("invalid header 'x-httpcachefs-control' for --header: it carries a daemon's control key, which is never sent with a fetch"))),
            ("X-Httpcachefs-Controls: k", .success("X-Httpcachefs-Controls: k")),
        ]
        for (text, expected) in cases {
            let got = Result { try HeaderLine.validate(text) }.mapError { $0 as! UsageError }
            XCTAssertEqual(got, expected, text)
        }
    }
}
