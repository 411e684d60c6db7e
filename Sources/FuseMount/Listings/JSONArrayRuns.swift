/// The elements of a JSON document's top-level array, handed out as smaller arrays of whole
/// elements ("runs"), so that a decoder sees a run at a time and never the whole document.
///
/// It only finds where each element ends: a comma or the closing bracket at the array's own
/// depth, outside strings (a backslash in a string escapes the byte after it). It checks no
/// more of the grammar than that; what is inside an element is the decoder's to judge, and a
/// run the decoder refuses fails the document as the whole document would have failed. The
/// split falls only on an ASCII comma outside strings, so it never cuts a UTF-8 sequence or an
/// escape in two. Pure: no Foundation, no allocation but the run it builds.
enum JSONArrayRuns {
    /// Bytes that are no array of elements: nothing but whitespace around one `[ ... ]`, no
    /// element empty (but a comma after the last, as `JSONDecoder` allows), every string and
    /// bracket closed.
    struct Malformed: Error, Equatable {
        /// Byte offset where it was seen.
        var offset: Int
    }

    /// Calls `body` with each run of up to `perRun` elements as a JSON array of its own
    /// (`[e1,e2]`), in order; none for an empty array. Throws `Malformed` at the first byte that
    /// is not where an array's element or separator can be, or whatever `body` throws.
    static func forEachRun(_ bytes: [UInt8], perRun: Int, _ body: ([UInt8]) throws -> Void) throws {
        precondition(perRun > 0)
        var i = skipSpace(bytes, from: 0)
        guard i < bytes.count, bytes[i] == UInt8(ascii: "[") else { throw Malformed(offset: i) }
        i += 1
        var run: [UInt8] = [UInt8(ascii: "[")]
        var inRun = 0
        func flush() throws {
            guard inRun > 0 else { return }
            run.append(UInt8(ascii: "]"))
            try body(run)
            run.removeAll(keepingCapacity: true)
            run.append(UInt8(ascii: "["))
            inRun = 0
        }
        i = skipSpace(bytes, from: i)
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") {
            i += 1   // an empty array
        } else {
            var elements = 0
            while true {
                let start = i
                let (end, last) = try elementEnd(bytes, from: start)
                if skipSpace(bytes, from: start) == end {
                    // Whitespace alone is no element ("[1,,2]", "[,1]"), but for one comma
                    // after the last ("[1,]"), which Foundation's decoder takes, and so do we.
                    guard last, elements > 0 else { throw Malformed(offset: end) }
                    i = end + 1
                    break
                }
                elements += 1
                if inRun > 0 { run.append(UInt8(ascii: ",")) }
                run.append(contentsOf: bytes[start..<end])
                inRun += 1
                if inRun == perRun { try flush() }
                i = end + 1
                if last { break }
            }
            try flush()
        }
        let rest = skipSpace(bytes, from: i)
        guard rest == bytes.count else { throw Malformed(offset: rest) }
    }

    /// Where the element starting at `from` ends: the offset of the comma or closing bracket
    /// after it, and whether that was the closing bracket.
    private static func elementEnd(_ bytes: [UInt8], from: Int) throws -> (Int, Bool) {
        var depth = 0
        var inString = false
        var escaped = false
        var i = from
        while i < bytes.count {
            let c = bytes[i]
            if inString {
                if escaped { escaped = false } else if c == UInt8(ascii: "\\") { escaped = true } else if c == UInt8(ascii: "\"") { inString = false }
            } else {
                switch c {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    if depth == 0 {
                        guard c == UInt8(ascii: "]") else { throw Malformed(offset: i) }
                        return (i, true)
                    }
                    depth -= 1
                case UInt8(ascii: ","):
                    if depth == 0 { return (i, false) }
                default: break
                }
            }
            i += 1
        }
        throw Malformed(offset: bytes.count)   // the array (or a string in it) never closed
    }

    /// JSON's whitespace: space, tab, line feed, carriage return.
    private static func skipSpace(_ bytes: [UInt8], from: Int) -> Int {
        var i = from
        while i < bytes.count, DirectoryListing.isSpace(bytes[i]) { i += 1 }
        return i
    }
}
