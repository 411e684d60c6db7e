import FuzzSupport
@testable import Settings

/// The config file and the values in it (sizes, durations, booleans, header lines), which the
/// command line shares. Invariants: sizes and durations are never negative, and a validated
/// header line has no line break.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfigFile(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    var values: [String] = []
    if let file = try? ConfigFile.parse(text, path: "config") {
        values = Array(file.values.values) + file.lists.values.flatMap { $0 }
    } else {
        values = text.split(separator: "\n").map(String.init)
    }
    for value in values.prefix(16) {
        if let bytes = try? ByteSize.parse(value, option: "size") { fuzzCheck(bytes >= 0, "size \(value.debugDescription) is \(bytes)") }
        if let seconds = try? DurationValue.parse(value, option: "duration") {
            fuzzCheck(seconds >= 0 && seconds.isFinite, "duration \(value.debugDescription) is \(seconds)")
        }
        _ = try? BoolValue.parse(value, option: "bool")
        if let header = try? HeaderLine.validate(value) {
            fuzzCheck(!header.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }), "header \(header.debugDescription)")
        }
    }
    return 0
}
