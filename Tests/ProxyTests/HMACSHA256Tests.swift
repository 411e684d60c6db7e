import XCTest
import CoreTypes

/// The hand-written SHA-256 and HMAC against the published vectors: FIPS 180-2's examples (and
/// the padding edges around 55, 56 and 64 bytes) and RFC 4231's HMAC-SHA-256 test cases.
final class HMACSHA256Tests: XCTestCase {
    private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
    private func bytes(hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = hex.startIndex
        while i < hex.endIndex {
            let j = hex.index(i, offsetBy: 2)
            out.append(UInt8(hex[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    func testFIPS180Examples() {
        XCTAssertEqual(hex(SHA256.hash(Array("abc".utf8))), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(hex(SHA256.hash([])), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(hex(SHA256.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        XCTAssertEqual(hex(SHA256.hash([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000))),
                       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// Fed in pieces of every size, the digest is the one of the whole.
    func testStreamingAgreesWithOneShotAcrossBlockEdges() {
        for length in [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 200] {
            let message = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let whole = SHA256.hash(message)
            for piece in [1, 3, 63, 64, 65] {
                var s = SHA256()
                var i = 0
                while i < message.count {
                    s.update(Array(message[i..<min(i + piece, message.count)]))
                    i += piece
                }
                XCTAssertEqual(s.finish(), whole, "length \(length) in pieces of \(piece)")
            }
        }
    }

    func testRFC4231Vectors() {
        let cases: [(key: [UInt8], data: [UInt8], mac: String)] = [
            ([UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8),
             "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
            (Array("Jefe".utf8), Array("what do ya want for nothing?".utf8),
             "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
            ([UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50),
             "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
            (bytes(hex: "0102030405060708090a0b0c0d0e0f10111213141516171819"), [UInt8](repeating: 0xcd, count: 50),
             "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
            ([UInt8](repeating: 0xaa, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
             "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
            ([UInt8](repeating: 0xaa, count: 131),
             Array("This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.".utf8),
             "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
        ]
        for (i, c) in cases.enumerated() {
            XCTAssertEqual(hex(HMACSHA256(key: c.key).mac(c.data)), c.mac, "RFC 4231 test case \(i + 1 == 5 ? 6 : i + 1 == 6 ? 7 : i + 1)")
        }
        // Test case 5: the output truncated to 128 bits.
        XCTAssertEqual(hex(Array(HMACSHA256(key: [UInt8](repeating: 0x0c, count: 20)).mac(Array("Test With Truncation".utf8)).prefix(16))),
                       "a3b6167473100ee06e0c796c2955552b")
    }

    func testMACsCompareByValue() {
        XCTAssertTrue(HMACSHA256.equal([1, 2, 3], [1, 2, 3]))
        XCTAssertFalse(HMACSHA256.equal([1, 2, 3], [1, 2, 4]))
        XCTAssertFalse(HMACSHA256.equal([1, 2, 3], [1, 2]))
    }
}
