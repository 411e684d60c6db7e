import Foundation

/// The AWS CLI's shared files, `~/.aws/credentials` and `~/.aws/config`: a profile's keys and
/// region, as the AWS tools read them (sections `[NAME]` in the credentials file, `[default]` or
/// `[profile NAME]` in the config file; `key = value` lines; `#` and `;` comments). Plain keys
/// and `credential_process` are taken; SSO, roles and web identity need calls to AWS's own
/// services, which httpcachefs does not make: such a profile is named in a clear error with the
/// AWS CLI's way around it (`unsupportedSource`).
public enum AWSSharedFiles {
    /// A profile's settings that s3:// URLs use; nil fields were not set.
    public struct Profile: Equatable, Sendable {
        public var accessKeyID: String?
        public var secretAccessKey: String?
        public var sessionToken: String?
        public var region: String?
        public var endpointURL: String?
        /// `credential_process`: a command whose output (JSON) gives temporary keys.
        public var credentialProcess: String? = nil
        /// What the profile would take its keys from that httpcachefs does not read: `sso`,
        /// `role_arn`, `web_identity_token_file`; nil when none.
        public var unsupportedSource: String? = nil

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
        var profile = Profile(accessKeyID: pick("aws_access_key_id"), secretAccessKey: pick("aws_secret_access_key"),
                              sessionToken: pick("aws_session_token"),
                              region: fromConfig["region"].flatMap { $0.isEmpty ? nil : $0 },
                              endpointURL: fromConfig["endpoint_url"].flatMap { $0.isEmpty ? nil : $0 })
        profile.credentialProcess = pick("credential_process")
        if pick("sso_session") != nil || pick("sso_start_url") != nil || pick("sso_account_id") != nil {
            profile.unsupportedSource = "AWS SSO (IAM Identity Center: sso_session / sso_start_url)"
        } else if pick("role_arn") != nil {
            profile.unsupportedSource = pick("web_identity_token_file") != nil ? "a web identity role (role_arn with web_identity_token_file)" : "an assumed role (role_arn)"
        } else if pick("web_identity_token_file") != nil {
            profile.unsupportedSource = "a web identity token (web_identity_token_file)"
        }
        return profile
    }

    /// The keys a `credential_process` printed (the AWS CLI's format: a JSON object with
    /// `Version` 1, `AccessKeyId`, `SecretAccessKey`, optional `SessionToken` and `Expiration`,
    /// an ISO 8601 time), or why not. The message never holds the output (it holds the secret).
    public static func processCredentials(_ output: [UInt8]) -> Result<(credentials: SigV4.Credentials, expiration: Date?), ProcessOutputError> {
        guard let object = try? JSONSerialization.jsonObject(with: Data(output)) as? [String: Any] else {
            return .failure(ProcessOutputError("its output is no JSON object"))
        }
        if let version = object["Version"] as? Int, version != 1 {
            return .failure(ProcessOutputError("its output has Version \(version); only 1 is known"))
        }
        guard let id = object["AccessKeyId"] as? String, !id.isEmpty,
              let secret = object["SecretAccessKey"] as? String, !secret.isEmpty else {
            return .failure(ProcessOutputError("its output lacks AccessKeyId or SecretAccessKey"))
        }
        let token = (object["SessionToken"] as? String).flatMap { $0.isEmpty ? nil : $0 }
        var expiration: Date?
        if let text = object["Expiration"] as? String {
            // `2026-11-29T10:00:00Z`, with or without a fraction or a `+00:00` zone.
            var t = text
            if t.hasSuffix("+00:00") { t = String(t.dropLast(6)) + "Z" }
            guard let date = HTTPDate.parseISO8601(t) else { return .failure(ProcessOutputError("its Expiration '\(text)' is no UTC ISO 8601 time")) }
            expiration = date
        }
        return .success((SigV4.Credentials(accessKeyID: id, secretAccessKey: secret, sessionToken: token), expiration))
    }

    public struct ProcessOutputError: Error, CustomStringConvertible, Equatable {
        public let description: String
        public init(_ description: String) { self.description = description }
    }
}
