import ArgumentParser

// PLACEHOLDER: filled in by the owner of this command.
struct PreloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "preload", abstract: "(not yet implemented)")
    func run() async throws { throw ValidationError("not yet implemented") }
}
