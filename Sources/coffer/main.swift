import ArgumentParser
import CofferAgentProtocol
import CofferCommandLine
import CofferCrypto

#if canImport(Glibc)
import Glibc
#endif

// `coffer`, the program people run. `list`, `search` and `show` (as text) are answered here, over the agent's
// socket, when an agent runs for the home: this program links the agent protocol and nothing of the store, the
// network or OpenPGP, so it starts in a fraction of the time `coffer-core` takes. Every other command, and these
// three whenever this path cannot finish (no agent, a locked account, a failure, `--help`, bad options), is
// `coffer-core`, beside this program, which this process becomes with the same arguments: it has printed nothing by
// then, and those three commands only read, so running one again there is safe. docs/APP.md, "Two programs".

// The three commands as ArgumentParser parses a command installed beside its parent (`_superCommandName`, as git's
// commands): the options are coffer-core's, and the check for a completion-script request that a root command makes
// first (coffer-core answers that) is skipped.

/// `coffer list`'s options.
struct List: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", _superCommandName: "coffer")
    @OptionGroup var options: ListOptions
}

/// `coffer search`'s options.
struct Search: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "search", _superCommandName: "coffer")
    @OptionGroup var options: SearchOptions
}

/// `coffer show`'s options.
struct Show: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", _superCommandName: "coffer")
    @OptionGroup var options: ShowOptions
}

/// Runs `arguments` through the agent if it is a command this program answers. It is synchronous, from parse to
/// print: this process never starts the concurrency runtime.
///
/// - Returns: Whether it ran to the end.
func answeredHere(_ arguments: [String]) -> Bool {
    guard arguments.count >= 2 else { return false }
    let rest = Array(arguments.dropFirst(2))
    do {
        let command: any MailReading
        switch arguments[1] {
        case "list": command = try List.parse(rest).options
        case "search": command = try Search.parse(rest).options
        case "show":
            let options = try Show.parse(rest).options
            guard !options.html else { return false }
            command = options
        default: return false
        }
        guard let client = try AgentClient.connect(socketPath: try command.home.paths().agentSocket) else {
            return false
        }
        defer { client.close() }
        try command.run(client)
        return true
    } catch {
        return false
    }
}

/// Becomes `coffer-core` (the file of that name in this program's folder) with these arguments.
func becomeCore() -> Never {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let length = readlink("/proc/self/exe", &buffer, Int(PATH_MAX))
    let own = length > 0 ? String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    let core = String(own[..<(own.lastIndex(of: "/") ?? own.startIndex)]) + "/coffer-core"
    execv(core, CommandLine.unsafeArgv)
    let reason = String(cString: strerror(errno))
    let message = "coffer: could not start \(core) (\(reason)); it is built and installed beside coffer.\n"
    _ = Array(message.utf8).withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(127)
}

// The mail text this process prints is kept from other processes of the user as in coffer-core.
_ = ProcessSettings.hardenMemory()
if answeredHere(CommandLine.arguments) { exit(0) }
becomeCore()
