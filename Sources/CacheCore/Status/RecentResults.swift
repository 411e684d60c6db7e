/// The last few results of a pure function of a string, by that string.
///
/// Why: a player's requests name one URL over and over, and parsing it with Foundation's
/// `URLComponents` (IDNA for the host included) on every request was a tenth of the proxy's CPU
/// per request: the open's cache key, the URL's validation, its origin's name, a tier's view of
/// it. A hit here is one dictionary look-up under an uncontended lock.
///
/// Only for functions whose result depends on the string alone. Bounded: at `capacity` entries
/// the table starts over (simpler than an LRU, and a working set that large is a scan, which
/// gains nothing from a memo anyway).
public final class RecentResults<Value: Sendable>: Sendable {
    private struct Table {
        var values: [String: Value] = [:]
        /// What the results were made under (`value(for:generation:)`).
        var generation: UInt64 = 0
    }
    private let table: LockedValue<Table>
    private let capacity: Int

    public init(capacity: Int = 64) {
        self.capacity = capacity
        table = LockedValue(Table())
    }

    public func cached(_ key: String) -> Value? { table.withLock { $0.values[key] } }

    public func store(_ value: Value, for key: String) {
        table.withLock { t in
            if t.values.count >= capacity, t.values[key] == nil { t.values.removeAll(keepingCapacity: true) }
            t.values[key] = value
        }
    }

    /// `value(for:)` of a function that also depends on something changing rarely, counted by
    /// `generation` (the process's S3 buckets, for cache keys): results made under another
    /// generation are dropped first.
    public func value(for key: String, generation: UInt64, _ make: (String) throws -> Value) rethrows -> Value {
        let hit: Value? = table.withLock { t in
            if t.generation != generation {
                t.values.removeAll(keepingCapacity: true)
                t.generation = generation
                return nil
            }
            return t.values[key]
        }
        if let hit { return hit }
        let v = try make(key)
        table.withLock { t in
            guard t.generation == generation else { return }
            if t.values.count >= capacity, t.values[key] == nil { t.values.removeAll(keepingCapacity: true) }
            t.values[key] = v
        }
        return v
    }

    /// The memorised result for `key`, or `make(key)`, run outside the lock and remembered (an
    /// error is not remembered: errors are rare, and cheap to make again).
    public func value(for key: String, _ make: (String) throws -> Value) rethrows -> Value {
        if let v = cached(key) { return v }
        let v = try make(key)
        store(v, for: key)
        return v
    }
}
