import Foundation

/// The AWS CLI's shared files, `~/.aws/credentials` and `~/.aws/config`: a profile's keys and
/// region, as the AWS tools read them (sections `[NAME]` in the credentials file, `[default]` or
/// `[profile NAME]` in the config file; `key = value` lines; `#` and `;` comments). Only plain
/// keys are taken: `credential_process`, SSO and role settings are not (issue 48: not yet).
public enum AWSSharedFiles {
    /// A profile's settings that s3:// URLs use; nil fields were not set.
    public struct Profile: Equatable, Sendable {
        public var accessKeyID: String?
        public var secretAccessKey: String?
        public var sessionToken: String?
        public var region: String?
        public var endpointURL: String?

        public init(accessKeyID: String? = nil, secretAccessKey: String? = nil, sessionToken: String? = nil,
                    region: String? = nil, endpointURL: String? = nil) {
            self.accessKeyID = accessKeyID
            self.secretAccessKey = secretAccessKey
            self.sessionToken = sessionToken
            self.region = region
            self.endpointURL = endpointURL
        }
    }

    /// The sections of an INI-style file: name to keys (lowercased) to values.
    public static func sections(_ text: String) -> [String: [String: String]] {
        var result: [String: [String: String]] = [:]
        var current: String?
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r" }) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                current = line.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
                if let current, result[current] == nil { result[current] = [:] }
                continue
            }
            guard let current, let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            result[current]?[key] = value
        }
        return result
    }

    /// Profile `name` from the two files' texts: keys from the credentials file (else the config
    /// file's section, as the AWS CLI allows), region and endpoint from the config file.
    public static func profile(_ name: String, credentials: String?, config: String?) -> Profile {
        let fromCredentials = credentials.map(sections)?[name] ?? [:]
        let configSections = config.map(sections) ?? [:]
        let fromConfig = configSections[name == "default" ? "default" : "profile \(name)"] ?? [:]
        func pick(_ key: String) -> String? {
            let v = fromCredentials[key] ?? fromConfig[key]
            return v?.isEmpty == false ? v : nil
        }
        return Profile(accessKeyID: pick("aws_access_key_id"), secretAccessKey: pick("aws_secret_access_key"),
                       sessionToken: pick("aws_session_token"),
                       region: fromConfig["region"].flatMap { $0.isEmpty ? nil : $0 },
                       endpointURL: fromConfig["endpoint_url"].flatMap { $0.isEmpty ? nil : $0 })
    }
}
