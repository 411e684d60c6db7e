import CoreTypes

/// What a read shows of its reader's course: its first read, one that continues the last, or a
/// jump (`Reader.updateReadAhead` judges it; `EntryStateMachine.readRequested` lets go of the
/// fetches a seek left behind). Here, not in the engine, so that the machine and the engine do not
/// name each other.
package enum AccessPattern { case first, sequential, seek }
