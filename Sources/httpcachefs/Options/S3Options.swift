import ArgumentParser
import CacheCore
import Foundation
import FuseMount
import Settings

/// Buckets as libraries: where the buckets of `s3://BUCKET/KEY` URLs are and the keys that sign
/// their requests (`--s3-*`, else the AWS environment: `AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION` / `AWS_DEFAULT_REGION`,
/// `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL`), else the AWS CLI's profile (`$AWS_PROFILE` or
/// `default` in `~/.aws/credentials` and `~/.aws/config`). Part of `CacheOptions`; each is also a config-file
/// key of the same name, and all but the secret and the token fstab words.
///
/// The secret and the token are masked in the process's own arguments (`ArgumentMasking`), and
/// appear in no log line, status page, metric or URL: an s3:// URL becomes the HTTP URL of the
/// object at the endpoint (`S3Endpoint`), and the fetcher signs each request to that endpoint.
/// The environment is the better place for them: the background daemon inherits it.
struct S3Options: ParsableArguments {
    @Option(name: .customLong("s3-endpoint"), parsing: .unconditional,
            help: ArgumentHelp("S3 endpoint of s3:// URLs, e.g. http://127.0.0.1:9000 (MinIO, Ceph, any S3-compatible server; addressed path-style). Default: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS (https://BUCKET.s3.REGION.amazonaws.com).", valueName: "url"))
    var endpoint: String?

    @Option(name: .customLong("s3-region"), parsing: .unconditional,
            help: ArgumentHelp("Region s3:// requests are signed for (default: $AWS_REGION, $AWS_DEFAULT_REGION, else us-east-1).", valueName: "region"))
    var region: String?

    @Option(name: .customLong("s3-access-key-id"), parsing: .unconditional,
            help: ArgumentHelp("Access key id for s3:// URLs (default: $AWS_ACCESS_KEY_ID; none: requests go unsigned, for public buckets).", valueName: "id"))
    var accessKeyID: String?

    @Option(name: .customLong("s3-secret-access-key"), parsing: .unconditional,
            help: ArgumentHelp("Secret access key for s3:// URLs (default: $AWS_SECRET_ACCESS_KEY, the better place: the environment is not shown by ps).", valueName: "key"))
    var secretAccessKey: String?

    @Option(name: .customLong("s3-session-token"), parsing: .unconditional,
            help: ArgumentHelp("Session token of temporary credentials (default: $AWS_SESSION_TOKEN).", valueName: "token"))
    var sessionToken: String?

    @Flag(name: .customLong("s3-force-path-style"),
          help: "Address buckets as ENDPOINT/BUCKET/KEY (the default with --s3-endpoint) rather than BUCKET.ENDPOINT/KEY.")
    var forcePathStyle = false

    /// Set by a mount joining a running daemon on the settings it hands over: they are the
    /// joining command's, resolved in its own environment and profile, and the daemon's own
    /// environment, profile and config-file keys must add nothing to them (its keys go to its
    /// own mounts' buckets only).
    @Flag(name: .customLong("s3-given-only"), help: .hidden)
    var givenOnly = false

    /// The source of temporary keys a joining mount resolved (`S3Endpoint.credentialSource`).
    @Option(name: .customLong("s3-credential-source"), help: .hidden)
    var credentialSource: String?

    init() {}

    /// The options that make a daemon resolve `endpoint` exactly (`givenOnly`): what a mount
    /// joining it sends ahead of its own arguments. The secret and token among them travel to
    /// the daemon's control endpoint only (loopback, with the control key); the daemon masks
    /// them in the arguments it lists.
    static func handOver(_ endpoint: S3Endpoint) -> [String] {
        var words = ["--s3-given-only", "--s3-region", endpoint.region]
        let aws = S3Endpoint.aws(region: endpoint.region, credentials: nil)
        if endpoint.scheme != aws.scheme || endpoint.authority != aws.authority {
            words += ["--s3-endpoint", "\(endpoint.scheme)://\(endpoint.authority)"]
        } else if endpoint.pathStyle {
            words.append("--s3-force-path-style")
        }
        if let keys = endpoint.credentials {
            words += ["--s3-access-key-id", keys.accessKeyID, "--s3-secret-access-key", keys.secretAccessKey]
            if let token = keys.sessionToken { words += ["--s3-session-token", token] }
        }
        if let source = endpoint.credentialSource { words += ["--s3-credential-source", source] }
        return words
    }

    /// Whether any S3 setting was given as a flag or in the config file.
    func isGiven(file: ConfigFile?) -> Bool {
        let flags: [String?] = [endpoint, region, accessKeyID, secretAccessKey, sessionToken]
        let keys = ["s3-endpoint", "s3-region", "s3-access-key-id", "s3-secret-access-key", "s3-session-token", "s3-force-path-style"]
        return forcePathStyle || flags.contains { $0 != nil } || keys.contains { file?[$0] != nil }
    }

    /// The endpoint, region, style and keys, from the flags, else the config file, else the
    /// environment.
    func resolve(file: ConfigFile?, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> S3Endpoint {
        var endpoint = try resolveSettings(file: givenOnly ? nil : file, environment: givenOnly ? [:] : environment)
        if givenOnly, let credentialSource, endpoint.credentials != nil { endpoint.credentialSource = credentialSource }
        return endpoint
    }

    private func resolveSettings(file: ConfigFile?, environment: [String: String]) throws -> S3Endpoint {
        func env(_ names: String...) -> String? {
            for n in names { if let v = environment[n], !v.isEmpty { return v } }
            return nil
        }
        func pick(_ flag: String?, _ key: String) -> String? { setting(flag, key, in: file)?.text }
        // The AWS CLI's profile ($AWS_PROFILE, else "default"): last, as the AWS tools take it.
        let profile: AWSSharedFiles.Profile = environment.isEmpty ? AWSSharedFiles.Profile() : {
            let home = environment["HOME"] ?? NSHomeDirectory()
            func read(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }
            return AWSSharedFiles.profile(env("AWS_PROFILE", "AWS_DEFAULT_PROFILE") ?? "default",
                                          credentials: read(env("AWS_SHARED_CREDENTIALS_FILE") ?? home + "/.aws/credentials"),
                                          config: read(env("AWS_CONFIG_FILE") ?? home + "/.aws/config"))
        }()
        let region = pick(self.region, "s3-region") ?? env("AWS_REGION", "AWS_DEFAULT_REGION") ?? profile.region ?? "us-east-1"
        guard !region.isEmpty, region.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }) else {
            throw UsageError("invalid S3 region '\(region)': expected lowercase letters, digits and hyphens, like eu-west-1")
        }
        var id = pick(accessKeyID, "s3-access-key-id") ?? env("AWS_ACCESS_KEY_ID")
        var secret = pick(secretAccessKey, "s3-secret-access-key") ?? env("AWS_SECRET_ACCESS_KEY")
        var token = pick(sessionToken, "s3-session-token") ?? env("AWS_SESSION_TOKEN")
        var source: String?
        if id == nil, secret == nil, token == nil {
            (id, secret, token) = (profile.accessKeyID, profile.secretAccessKey, profile.sessionToken)
            if id == nil, secret == nil, let command = profile.credentialProcess {
                // Run only for a command given s3:// URLs (`ResolvedCacheOptions.s3Endpoint`).
                source = "credential_process " + command
            } else if id == nil, secret == nil, let unsupported = profile.unsupportedSource {
                let name = env("AWS_PROFILE", "AWS_DEFAULT_PROFILE") ?? "default"
                throw UsageError("the AWS profile '\(name)' takes its keys from \(unsupported), which httpcachefs does not read: "
                    + "add 'credential_process = aws configure export-credentials --profile \(name) --format process' to a profile of its own and use that, "
                    + "or export the keys with: eval \"$(aws configure export-credentials --profile \(name) --format env)\"")
            }
        }
        var credentials: SigV4.Credentials?
        switch (id, secret) {
        case let (id?, secret?):
            for (value, what) in [(id, "access key id"), (secret, "secret access key"), (token ?? "", "session token")]
            where value.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7F }) {
                throw UsageError("the S3 \(what) holds a space or control character")
            }
            credentials = SigV4.Credentials(accessKeyID: id, secretAccessKey: secret, sessionToken: token)
        case (nil, nil):
            if token != nil { throw UsageError("an S3 session token needs its access key id and secret access key (--s3-access-key-id, --s3-secret-access-key or $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY)") }
        case (_?, nil):
            throw UsageError("an S3 access key id needs its secret: give --s3-secret-access-key or $AWS_SECRET_ACCESS_KEY")
        case (nil, _?):
            throw UsageError("an S3 secret access key needs its key id: give --s3-access-key-id or $AWS_ACCESS_KEY_ID")
        }
        var pathStyle = forcePathStyle
        if !pathStyle, let file, let value = file["s3-force-path-style"] {
            pathStyle = try BoolValue.parse(value, option: file.describe("s3-force-path-style"))
        }
        var resolved: S3Endpoint
        if let url = pick(endpoint, "s3-endpoint") ?? env("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL") ?? profile.endpointURL {
            do { resolved = try S3Endpoint.parse(endpoint: url, region: region, pathStyle: true, credentials: credentials) } catch let e as S3URLError {
                throw UsageError("bad --s3-endpoint: \(e)")
            }
        } else {
            resolved = .aws(region: region, pathStyle: pathStyle, credentials: credentials)
        }
        resolved.credentialSource = source
        return resolved
    }

    /// `text` (a URL, `NAME=URL` or `DIR=URL`) with an s3:// URL in it made the HTTP URL of
    /// its bucket and key at `endpoint`, and that bucket's root registered for S3 listings.
    /// Anything else is returned as it is.
    /// - Parameter holder: the mountpoint whose mount names the bucket (it leaves the process's
    ///   buckets when that mount ends: `S3Buckets.release`); nil: a command's, for its whole run.
    static func map(_ text: String, endpoint: S3Endpoint, holder: String? = nil) throws -> String {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        // `s3://…`, or `NAME=s3://…` (`NAME = s3://…` in a URL list).
        guard let r = trimmed.range(of: "s3://", options: .caseInsensitive) else { return text }
        let head = String(trimmed[..<r.lowerBound])
        let before = head.trimmingCharacters(in: .whitespaces)
        guard before.isEmpty || (before.hasSuffix("=") && !before.contains("://")) else { return text }
        let url = String(trimmed[r.lowerBound...])
        do {
            guard let (bucket, key) = try S3Endpoint.split(url) else { return text }
            let renewal = endpoint.credentialSource.flatMap { source in
                source.hasPrefix("credential_process ") ? S3CredentialProcess.renewal(command: String(source.dropFirst("credential_process ".count))) : nil
            }
            do { try S3Buckets.process.register(S3Buckets.Bucket(bucket: bucket, endpoint: endpoint), renewal: renewal, holder: holder) } catch let conflict as S3Buckets.Conflict {
                throw UsageError("s3://\(bucket): \(conflict); give this mount its own --cache-dir, or the same keys and region")
            }
            S3Listing.register(root: endpoint.root(bucket: bucket), listingBase: endpoint.listingBase(bucket: bucket))
            return head + endpoint.url(bucket: bucket, key: key)
        } catch let e as S3URLError {
            throw UsageError("bad S3 URL: \(e)")
        }
    }

    /// Whether any of `texts` names an s3:// URL.
    static func mentionsS3(_ texts: [String]) -> Bool {
        texts.contains { $0.range(of: "s3://", options: .caseInsensitive) != nil }
    }
}
