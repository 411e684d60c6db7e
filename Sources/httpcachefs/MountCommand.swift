import ArgumentParser

// PLACEHOLDER: filled in by the owner of this command.
struct MountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "mount", abstract: "(not yet implemented)")
    func run() async throws { throw ValidationError("not yet implemented") }
}
