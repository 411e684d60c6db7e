// swift-tools-version:5.3
// Coverage-guided fuzz targets (libFuzzer) for every parser of outside input in httpcachefs.
//
// A package of its own, so the main package's `swift build` and `swift test` never see it. Each
// target is an executable whose `main.swift` is compiled with `-parse-as-library`, so it has no
// `main` of its own: libFuzzer supplies it and calls the target's `LLVMFuzzerTestOneInput`.
// Tools version 5.3 on purpose: from 5.5 on SwiftPM renames an executable's entry point to
// `<Target>_main` and links `main` to it, which leaves libFuzzer's `main` unused and the link
// failing. Build and run the targets with `Fuzz/run.sh`, which passes `-sanitize=fuzzer,address`
// and `-parse-as-library`; the parsers' internals are reached through `@testable import`, which
// works because a debug build compiles every module with testing enabled.
import Foundation
import PackageDescription

/// A path dependency's identity is the name of its directory, which is whatever the checkout is
/// called; the product is looked up under that name. (A checkout directory called `fuzz` would
/// clash with this package's own identity; `run.sh` says so.)
let mainPackage = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .lastPathComponent.lowercased()
let parsers: Target.Dependency = .product(name: "httpcachefs-parsers", package: mainPackage)

/// One fuzz executable per parser family, each with a seed corpus in `Tests/FuzzCorpus/<name>/`.
let fuzzTargets = [
    "FuzzByteRanges", "FuzzProxyURL", "FuzzHLSPlaylist", "FuzzDirectoryListing", "FuzzURLList",
    "FuzzConfigFile", "FuzzResponseHeaders", "FuzzReadPlanner", "FuzzHostHeader", "FuzzWebDAVListing", "FuzzURLSpelling",
]

let package = Package(
    name: "httpcachefs-fuzz",
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        .target(name: "FuzzSupport", dependencies: [.product(name: "Logging", package: "swift-log")]),
    ] + fuzzTargets.map { name in
        .target(name: name, dependencies: ["FuzzSupport", parsers])
    }
)
