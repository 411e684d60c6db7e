import ArgumentParser

/// The `httpcachefs` command: remote media as local files and proxy URLs, from one cache.
@main
struct HTTPCacheFS: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "httpcachefs",
        abstract: "Mount HTTP(S) URLs as read-only files and serve them through a local proxy, from one persistent cache.",
        version: Version.string,
        subcommands: [
            CatCommand.self, PreloadCommand.self, CacheCommand.self,
            MountCommand.self, ProxyCommand.self, URLCommand.self, StatusCommand.self, RefreshCommand.self,
        ]
    )
}

enum Version {
    static let string = "0.1.0"
    static let userAgent = "httpcachefs/\(string)"
}
