/// The entry's reader side by the names it had as fields of `EntryState`: it is the state
/// machine's now (`EntryReads`, `EntryStateMachine+Read`). Steps outside the read path (the
/// sink's read-ahead marks, the index row, the status page, removal and shutdown) use these;
/// `_modify`, so a change is made in place, never on a copy.
extension EntryState {
    /// Reads waiting for bytes to land.
    var waiters: [Waiter] {
        get { machine.reads.waiters }
        _modify { yield &machine.reads.waiters }
    }
    var hits: Int64 {
        get { machine.reads.hits }
        _modify { yield &machine.reads.hits }
    }
    var misses: Int64 {
        get { machine.reads.misses }
        _modify { yield &machine.reads.misses }
    }
    var bytesFromCache: Int64 {
        get { machine.reads.bytesFromCache }
        _modify { yield &machine.reads.bytesFromCache }
    }
    /// Read-ahead not read yet.
    var unreadAhead: RangeSet {
        get { machine.reads.unreadAhead }
        _modify { yield &machine.reads.unreadAhead }
    }
    var lastAccess: Double {
        get { machine.reads.lastAccess }
        _modify { yield &machine.reads.lastAccess }
    }
    var readStatsDirty: Bool {
        get { machine.reads.readStatsDirty }
        _modify { yield &machine.reads.readStatsDirty }
    }
    var readsByDoor: DoorReads {
        get { machine.reads.readsByDoor }
        _modify { yield &machine.reads.readsByDoor }
    }
}
