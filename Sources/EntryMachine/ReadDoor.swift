import CoreTypes

/// The front door a read came through.
public enum ReadDoor: String, Sendable, CaseIterable, Codable {
    case fuse, proxy, cli

    package var index: Int {
        switch self {
        case .fuse: return 0
        case .proxy: return 1
        case .cli: return 2
        }
    }
}
/// Reads of one file since the start, by door: reads asked, answered or not (kept with the
/// entry, under its shard lock, as its hits and misses are).
public struct DoorReads: Sendable, Codable, Equatable {
    public var fuse: Int64 = 0
    public var proxy: Int64 = 0
    public var cli: Int64 = 0

    public init(fuse: Int64 = 0, proxy: Int64 = 0, cli: Int64 = 0) {
        self.fuse = fuse
        self.proxy = proxy
        self.cli = cli
    }

    package mutating func add(_ door: ReadDoor) {
        switch door {
        case .fuse: fuse += 1
        case .proxy: proxy += 1
        case .cli: cli += 1
        }
    }
}
