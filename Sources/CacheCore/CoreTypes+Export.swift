/// The leaf module's types (byte ranges, HTTP dates and syntax, `LockedValue`, `ConditionLock`)
/// are CacheCore's to its importers: they live in the leaf so that both sides can use them
/// without the engine, and re-exported here, every `import CacheCore` sees them.
@_exported import CoreTypes

/// The entry machine and the pure types it decides with (`EntryInfo`, `CacheError`, `CacheKey`,
/// `ResponseHead`, `FetchPriority`, `ReaderClass`, ...) are CacheCore's to its importers too.
@_exported import EntryMachine
