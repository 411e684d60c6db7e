/// The entry's reader side by the names it had as fields of `EntryState`: it is the state
/// machine's now (`EntryReads`, `EntryStateMachine+Read`). Steps outside the read path (the
/// sink's read-ahead marks, the index row, the status page, removal and shutdown) use these;
/// get-only: the machine's events change them (`EntryStateMachine+Read`, `+Content`).
extension EntryState {
    /// Reads waiting for bytes to land.
    var waiters: [Waiter] { machine.reads.waiters }
    var hits: Int64 { machine.reads.hits }
    var misses: Int64 { machine.reads.misses }
    var bytesFromCache: Int64 { machine.reads.bytesFromCache }
    /// Read-ahead not read yet.
    var unreadAhead: RangeSet { machine.reads.unreadAhead }
    var lastAccess: Double { machine.reads.lastAccess }
    var readStatsDirty: Bool { machine.reads.readStatsDirty }
    var readsByDoor: DoorReads { machine.reads.readsByDoor }
}
