/// The last few results of a pure function of a string, by that string.
///
/// Why: a player's requests name one URL over and over, and parsing it with Foundation's
/// `URLComponents` (IDNA for the host included) on every request was a tenth of the proxy's CPU
/// per request. A hit here is one dictionary look-up under an uncontended lock.
///
/// Only for functions whose result depends on the string alone. Bounded: at `capacity` entries
/// the table starts over (simpler than an LRU, and a working set that large is a scan, which
/// gains nothing from a memo anyway).
public final class RecentResults<Value: Sendable>: Sendable {
    private let table: LockedValue<[String: Value]>
    private let capacity: Int

    public init(capacity: Int = 64) {
        self.capacity = capacity
        table = LockedValue([:])
    }

    public func cached(_ key: String) -> Value? { table.withLock { $0[key] } }

    public func store(_ value: Value, for key: String) {
        table.withLock { t in
            if t.count >= capacity, t[key] == nil { t.removeAll(keepingCapacity: true) }
            t[key] = value
        }
    }

    /// The memorised result for `key`, or `make(key)`, run outside the lock and remembered.
    public func value(for key: String, _ make: (String) -> Value) -> Value {
        if let v = cached(key) { return v }
        let v = make(key)
        store(v, for: key)
        return v
    }
}

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
