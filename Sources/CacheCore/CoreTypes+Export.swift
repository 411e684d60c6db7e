/// The leaf module's types (byte ranges, HTTP dates and syntax, `LockedValue`, `ConditionLock`)
/// are CacheCore's to its importers: they moved out so that both sides can use them without the
/// engine, and every `import CacheCore` still sees them.
@_exported import CoreTypes
