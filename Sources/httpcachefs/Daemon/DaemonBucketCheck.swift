import CacheCore
import Foundation

/// `cat` and `preload` of s3:// URLs while a daemon holds the cache: whether their requests may
/// go through that daemon's proxy, which signs them with the keys of the mount that named the
/// bucket.
///
/// The trust rule of credentials holds: a key is sent only where the user sent it. The daemon
/// signs a bucket's requests only with the keys its mount was given for that bucket; a command
/// hands no keys to a daemon for one read. So an object goes through the daemon when a mount of
/// it named the bucket, and
/// - the command reads it with the same keys, region and endpoint (its cache key is the
///   daemon's: the same keyed hash of the keys' identity, no secret compared), or
/// - the command has no keys of its own (the mount's keys sign it, as they do for any client
///   of the daemon's proxy).
/// It is refused in one line when no mount named the bucket, or the command's own keys are
/// other ones (their bytes would be another identity's). Blocking: the daemon is asked over its
/// control door (`s3-key`), one request per object.
enum DaemonBucketCheck {
    /// Throws the refusal for the first of `urls` (HTTP URLs the command made from s3:// ones)
    /// that may not go through the daemon; URLs under no bucket of this process pass.
    static func check(_ urls: [String], held: HeldCache, command: String) throws {
        let bucketURLs = urls.compactMap { url in S3Buckets.process.bucket(of: url).map { (url, $0) } }
        guard !bucketURLs.isEmpty else { return }
        guard let proxy = held.controlProxy() else { throw held.lockedError }
        var rules = try held.options.configuration().keyRules
        rules.credentialKey = CredentialKey.existing(directory: held.directory)
        let pid = proxy.pid.map(String.init) ?? "?"
        for (url, bucket) in bucketURLs {
            let answer = try DaemonControl.send("s3-key", query: [("url", url)], to: proxy, timeout: 30)
            let line = answer.lines.first ?? ""
            // 404: a daemon that takes no mounts (`proxy`), so no mount of it named the bucket.
            if answer.status == 404 || (answer.status == 200 && line == "none") {
                throw CommandFailure(Self.notNamed(root: bucket.root, pid: pid, command: command))
            }
            guard answer.status == 200, line.hasPrefix("key\t") else {
                throw CommandFailure("the daemon holding the cache (pid \(pid)) answered \(answer.status): \(answer.lines.joined(separator: "; "))")
            }
            let theirs = String(line.dropFirst(4))
            let ours = try rules.key(for: url).string
            guard bucket.endpoint.credentials == nil || theirs == ours else {
                throw CommandFailure(Self.otherKeys(root: bucket.root, pid: pid, command: command))
            }
        }
    }

    static func notNamed(root: String, pid: String, command: String) -> String {
        "no mount of the daemon (pid \(pid)) holding this cache reads the bucket at \(root), and \(command) hands no S3 keys to a daemon: mount the bucket there first, or give \(command) another --cache-dir"
    }

    static func otherKeys(root: String, pid: String, command: String) -> String {
        "the daemon (pid \(pid)) holding this cache reads the bucket at \(root) with other S3 keys (its mount's), and \(command) would send its own: give \(command) the mount's keys (or none: the mount's then sign), or another --cache-dir"
    }
}
