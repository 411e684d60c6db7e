import Foundation

/// One failed read or open, as the status page lists it.
public struct ErrorRecord: Sendable, Codable, Equatable {
    public var time: Date
    public var url: String
    /// First and last byte of the read (inclusive), nil for an open.
    public var start: Int64?
    public var end: Int64?
    /// The `kind` label of `httpcachefs_errors_total`.
    public var kind: String
    /// The origin's HTTP status, when it answered one.
    public var status: Int?
    /// The error as the front doors report it.
    public var cause: String
}

/// The last `capacity` errors: a ring, so a storm of failures costs no memory and no time.
struct RecentErrors {
    let capacity: Int
    private var items: [ErrorRecord] = []
    private var next = 0

    init(capacity: Int) {
        self.capacity = capacity
        items.reserveCapacity(capacity)
    }

    mutating func append(_ record: ErrorRecord) {
        if items.count < capacity {
            items.append(record)
        } else {
            items[next] = record
        }
        next = (next + 1) % capacity
    }

    var newestFirst: [ErrorRecord] {
        guard items.count == capacity else { return items.reversed() }
        return (items[next...] + items[..<next]).reversed()
    }
}
