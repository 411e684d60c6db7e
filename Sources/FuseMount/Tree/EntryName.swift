/// A directory entry's name as Linux sees it: its bytes.
///
/// Swift's `String` compares and hashes by canonical equivalence, so `café` written with one é
/// and `café` written as e and a combining accent, two names to the kernel and to the origin,
/// were one key of a directory: the second file of a listing could not be reached. Names are
/// keyed by their UTF-8 bytes instead, and sorted by them (the order `ls -f` and a C locale use).
struct EntryName: Hashable, Comparable, Sendable, CustomStringConvertible {
    let string: String

    init(_ string: String) { self.string = string }

    var description: String { string }

    static func == (a: EntryName, b: EntryName) -> Bool { a.string.utf8.elementsEqual(b.string.utf8) }

    func hash(into hasher: inout Hasher) {
        let hashed: Void? = string.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if hashed == nil { for b in string.utf8 { hasher.combine(b) } }
        hasher.combine(string.utf8.count)
    }

    static func < (a: EntryName, b: EntryName) -> Bool { a.string.utf8.lexicographicallyPrecedes(b.string.utf8) }
}
