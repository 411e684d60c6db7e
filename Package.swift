// swift-tools-version:6.1
// httpcachefs: remote media as local files (FUSE) and as proxy URLs, from one persistent cache.
//
// Dependency arrows point one way, toward CacheCore, which knows no C and no NIO:
//   httpcachefs (CLI, wiring) ──> FuseMount ──> CFuse3
//                             ──> Proxy (NIO) ──> HLS
//                             ──> HLS (playlists, preloader; no NIO)
//                             ──> Fetcher ──> CCurl, NIO (the tier's node client)
//                             ──> MetricsExport (the Prometheus backend of CacheCore's swift-metrics)
//   all of them               ──> CacheCore ──> EntryMachine (one entry's life, pure) ──> CoreTypes
//                                           ──> CoreTypes (byte ranges, HTTP dates and syntax, locks)
// FuseMount and Proxy never import each other; only the executable wires the libcurl source in.
import PackageDescription

// Every target builds in Swift 6 language mode (the tools version's default). `Settings`, `HLS`
// and `Proxy` have no `@unchecked Sendable` (NIO handlers stay on their event loop and cross
// threads only as `NIOLoopBound`); the few left in `CacheCore`, `Fetcher` and `FuseMount` say
// why next to them (docs/threads.md lists them).

let package = Package(
    name: "httpcachefs",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "httpcachefs", targets: ["httpcachefs"]),
        .executable(name: "httpcachefs-bench", targets: ["httpcachefs-bench"]),
        // For the fuzz targets in Fuzz/, a package of its own that depends on this one by path.
        .library(name: "httpcachefs-parsers", targets: ["CoreTypes", "CacheCore", "Fetcher", "FuseMount", "HLS", "Proxy", "Settings"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-atomics", from: "1.3.0"),
    ],
    targets: [
        // C bridges. Each is imported by exactly one Swift module.
        .systemLibrary(name: "CFuse3", pkgConfig: "fuse3", providers: [.apt(["libfuse3-dev"])]),
        .target(name: "CCurl", linkerSettings: [.linkedLibrary("curl")]),

        // The leaf both sides use: byte ranges, HTTP dates and syntax, the lock types. No
        // dependencies; CacheCore re-exports it, so its importers see these types as before.
        .target(name: "CoreTypes"),
        // One entry's life as a pure state machine (events in, actions out) and the pure types it
        // decides with: the read planner, the in-flight table, what a response head means. Its
        // state has setters inside this module only, so no write from the engine compiles.
        // CacheCore re-exports it.
        .target(name: "EntryMachine", dependencies: ["CoreTypes"]),
        // Pure Swift cache core: keys, slices, index, eviction, the engine that carries out what
        // the entry machine decides.
        .target(name: "CacheCore", dependencies: [
            "CoreTypes", "EntryMachine",
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "Atomics", package: "swift-atomics"),
        ]),
        // The metrics backend: a Prometheus registry per engine and the `/metrics` text. CacheCore
        // knows only swift-metrics; the executable chooses this backend and hands it to the proxy.
        .target(name: "MetricsExport", dependencies: [
            "CacheCore",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
        ]),
        // libcurl multi implementation of CacheCore.RangeSource, the cache tier's sources
        // (routing, version checks, and a SwiftNIO client for plain-HTTP nodes), and the layers
        // every engine's source runs in (`FetchLayers.standard`: offline mode, transfers counted).
        // Atomics: the transfer tracker's counters, which the status page reads.
        .target(name: "Fetcher", dependencies: [
            "CacheCore", "CCurl", .product(name: "Logging", package: "swift-log"),
            .product(name: "Atomics", package: "swift-atomics"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
        ]),
        // libfuse3 low-level file system over CacheCore.
        .target(name: "FuseMount", dependencies: [
            "CacheCore", "CFuse3", .product(name: "Logging", package: "swift-log"),
            .product(name: "Atomics", package: "swift-atomics"),
        ]),
        // HLS playlists (parsing, rewriting), their loader and the stream preloader, over
        // CacheCore: no NIO, so `preload` needs no server.
        .target(name: "HLS", dependencies: ["CacheCore"]),
        // Embedded HTTP proxy (RFC 9110 ranges, HLS rewriting) over CacheCore.
        .target(name: "Proxy", dependencies: [
            "CacheCore", "HLS",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The config file and the syntax of option values (sizes, durations, headers): a library
        // so that the fuzz targets can reach the parsers, which an executable cannot offer.
        .target(name: "Settings", dependencies: ["CoreTypes"]),
        // Tables for the terminal (`cache ls`, `status`) fitted to its width, counted in cells:
        // a library, so that their tests can reach them.
        .target(name: "TerminalText"),
        .executableTarget(name: "httpcachefs", dependencies: [
            "CacheCore", "Fetcher", "FuseMount", "HLS", "MetricsExport", "Proxy", "Settings", "TerminalText",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOPosix", package: "swift-nio"),
        ]),

        // Test support: an in-process loopback origin with fault injection, temporary cache dirs,
        // scripted and hand-driven `RangeSource`s for engine tests (CacheCore's and Fetcher's).
        .target(name: "TestSupport", dependencies: [
            "CacheCore",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ]),
        // Benchmarks: a program, not a test. Prints ratios against references measured in the same run.
        .executableTarget(name: "httpcachefs-bench", dependencies: [
            "CacheCore", "Fetcher", "TestSupport",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            // `scale --direct-fill` writes a cache's index rows itself (ScaleBench+DirectFill).
            .product(name: "GRDB", package: "GRDB.swift"),
        ]),

        .testTarget(name: "EntryMachineTests", dependencies: ["EntryMachine"]),
        .testTarget(name: "CacheCoreTests", dependencies: ["CacheCore", "CoreTypes", "EntryMachine", "MetricsExport", "TestSupport"]),
        .testTarget(name: "FetcherTests", dependencies: ["CacheCore", "Fetcher", "MetricsExport", "TestSupport"]),
        .testTarget(name: "FuseMountTests", dependencies: ["FuseMount", "Fetcher", "TestSupport"]),
        .testTarget(name: "SettingsTests", dependencies: ["Settings"]),
        .testTarget(name: "TerminalTextTests", dependencies: ["TerminalText"]),
        .testTarget(name: "HLSTests", dependencies: ["HLS"]),
        .testTarget(name: "ProxyTests", dependencies: ["Proxy", "HLS", "Fetcher", "MetricsExport", "TestSupport"]),
        .testTarget(name: "EndToEndTests", dependencies: ["CacheCore", "Fetcher", "Settings", "TestSupport", .product(name: "Logging", package: "swift-log")]),
    ]
)
