@testable import Fetcher

extension TransferState {
    /// `count` body bytes (zeros) arrived: for tables where only the counts matter.
    mutating func receiveBody(count: Int) -> (offset: Int, length: Int) {
        [UInt8](repeating: 0, count: count).withUnsafeBytes { receiveBody($0) }
    }

    /// These body bytes arrived.
    mutating func receiveBody(_ bytes: [UInt8]) -> (offset: Int, length: Int) {
        bytes.withUnsafeBytes { receiveBody($0) }
    }
}
