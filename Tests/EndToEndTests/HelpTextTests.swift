import Foundation
import XCTest

/// Help texts as a user reads them: ArgumentParser appends `(default: X)` to every option with a
/// default value, so a help string that names its default as well prints it twice.
extension CLITests {
    func testNoOptionInAnyHelpTextNamesItsDefaultTwice() throws {
        let commands = [["mount"], ["proxy"], ["url"], ["status"], ["cat"], ["preload"], ["cache", "ls"], ["cache", "info"],
                        ["cache", "rm"], ["cache", "clear"], ["cache", "verify"], ["cache", "export"]]
        for command in commands {
            let r = try run(["help"] + command, cacheDirectory: nil)
            XCTAssertEqual(r.status, 0, r.stderr)
            // One block per option: from a line starting with "  -" up to the next such line.
            let blocks = r.text.components(separatedBy: "\n  -").dropFirst()
            for block in blocks {
                let flat = block.split(whereSeparator: \.isWhitespace).joined(separator: " ")
                XCTAssertLessThanOrEqual(flat.components(separatedBy: "(default:").count - 1, 1,
                                         "\(command.joined(separator: " ")): -\(flat)")
            }
        }
    }
}
