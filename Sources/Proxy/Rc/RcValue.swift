import Foundation

/// A JSON value as rclone's remote control sends and answers it: parameters come in as a JSON
/// object or as form/query strings, answers go out as a JSON object. Equatable and `Sendable`,
/// so the request parsing and answer shaping are pure functions with table tests (`RcTests`).
public enum RcValue: Equatable, Sendable {
    case string(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case null
    case array([RcValue])
    case object([String: RcValue])

    /// The text of a string value, or of a number or bool as rclone's `GetString` would refuse
    /// it: nil for anything but a string.
    public var string: String? {
        if case let .string(s) = self { return s }
        return nil
    }

    /// rclone's `GetBool`: a JSON bool, or a string `strconv.ParseBool` takes (`true`, `1`, `t`...),
    /// or a number (non-zero is true). nil: not a boolean.
    public var bool: Bool? {
        switch self {
        case let .bool(b): return b
        case let .int(n): return n != 0
        case let .double(d): return d != 0
        case let .string(s):
            switch s {
            case "1", "t", "T", "true", "TRUE", "True": return true
            case "0", "f", "F", "false", "FALSE", "False": return false
            default: return nil
            }
        default: return nil
        }
    }

    /// rclone's `GetInt64`: a JSON number or a decimal string.
    public var int: Int64? {
        switch self {
        case let .int(n): return n
        case let .double(d): return d.rounded() == d && abs(d) < 9e18 ? Int64(d) : nil
        case let .string(s): return Int64(s)
        default: return nil
        }
    }

    /// A JSON document's top-level object; nil if it is not valid JSON or not an object.
    public static func parseObject(_ bytes: [UInt8]) -> [String: RcValue]? {
        guard case let .object(o)? = try? JSONDecoder().decode(RcValue.self, from: Data(bytes)) else { return nil }
        return o
    }

    /// The JSON text, keys sorted, indented as rclone indents its answers (one tab).
    public func json(indent: String = "") -> String {
        let inner = indent + "\t"
        switch self {
        case let .string(s): return Self.quoted(s)
        case let .int(n): return String(n)
        case let .double(d): return d.isFinite ? String(d) : "null"
        case let .bool(b): return b ? "true" : "false"
        case .null: return "null"
        case let .array(a):
            if a.isEmpty { return "[]" }
            return "[\n" + a.map { inner + $0.json(indent: inner) }.joined(separator: ",\n") + "\n" + indent + "]"
        case let .object(o):
            if o.isEmpty { return "{}" }
            return "{\n" + o.keys.sorted().map { inner + Self.quoted($0) + ": " + o[$0]!.json(indent: inner) }.joined(separator: ",\n")
                + "\n" + indent + "}"
        }
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped.
    static func quoted(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where u.value < 0x20 || u.value == 0x7F || u.value == 0x2028 || u.value == 0x2029:
                out += String(format: "\\u%04x", u.value)
            default: out.unicodeScalars.append(u)
            }
        }
        return out + "\""
    }
}

extension RcValue: Decodable {
    /// Tried in this order, so `true` stays a bool and `3` an integer (a number never decodes as
    /// a bool, nor `1.5` as an integer).
    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let n = try? c.decode(Int64.self) { self = .int(n) }
        else if let d = try? c.decode(Double.self) { self = .double(d) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([RcValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: RcValue].self)) }
    }
}
