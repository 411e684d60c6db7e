extension StringProtocol {
    /// Where the ASCII text `needle` first occurs, found byte by byte. Foundation's `range(of:)`
    /// (what `String.range(of:)` and `contains(_:)` resolve to with Foundation imported) goes
    /// through `NSString` and showed in the proxy's per-request profile. Inlinable: callers in
    /// other modules specialize it (generic code run unspecialized walks bytes through witness
    /// tables).
    @inlinable
    public func firstByteRange(of needle: StaticString) -> Range<String.Index>? {
        let n = UnsafeBufferPointer(start: needle.utf8Start, count: needle.utf8CodeUnitCount)
        guard let first = n.first else { return nil }
        let bytes = utf8
        var i = bytes.startIndex
        while let at = bytes[i...].firstIndex(of: first) {
            var j = at, k = 0
            while k < n.count, j < bytes.endIndex, bytes[j] == n[k] {
                bytes.formIndex(after: &j)
                k += 1
            }
            if k == n.count { return at..<j }
            i = bytes.index(after: at)
        }
        return nil
    }
}
