import Foundation
import Logging

// TEMPORARY STUB: being implemented (planner, in-flight table, slices, index, eviction).
final class ReaderState: @unchecked Sendable {
    var entry: EntryInfo
    init(entry: EntryInfo) { self.entry = entry }
}

final class EngineCore: @unchecked Sendable {
    init(configuration: CacheConfiguration, source: RangeSource, logger: Logger) throws {}
    func shutdown() {}
    func open(url: String, completion: @escaping @Sendable (Result<EntryInfo, CacheError>) -> Void) { fatalError("stub") }
    func cachedInfo(url: String) -> EntryInfo? { nil }
    func addChangeObserver(_ h: @escaping @Sendable (EntryInfo) -> Void) {}
    func status(url: String) -> EntryStatus? { nil }
    func list() -> [EntryStatus] { [] }
    func remove(url: String) throws {}
    func clear() throws {}
    var usage: CacheUsage { CacheUsage(bytes: 0, capacity: 0, entries: 0) }
    func verify() -> VerifyReport { VerifyReport(extentsChecked: 0, bytesChecked: 0, problems: []) }
    func read(reader: ReaderState, offset: Int64, length: Int, completion: @escaping @Sendable (Result<[UInt8], CacheError>) -> Void) { fatalError("stub") }
    func close(reader: ReaderState) {}
}
