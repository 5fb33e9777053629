import CofferAgentProtocol
import CofferCrypto
import CofferReading

#if canImport(Glibc)
import Glibc
#endif

// `coffer`, the program people run. `list`, `search` and `show` (as text) are answered here, over the agent's
// socket, when an agent runs for the home: this program links the agent protocol and nothing of the store, the
// network, OpenPGP or ArgumentParser, so it starts in a fraction of the time `coffer-core` takes. It reads only the
// usual forms of those three command lines (`ReadingCommand.recognize`). Every other command line, and those whenever
// this path cannot finish (no agent, a locked account, a failure), is `coffer-core`'s, beside this program, which
// this process becomes with the same arguments: it has printed nothing by then, and those three commands only read,
// so running one again there is safe. docs/APP.md, "Two programs".

/// Runs `arguments` through the agent if it is a command this program answers. It is synchronous, from the command
/// line to the last line printed: this process never starts the concurrency runtime.
///
/// - Returns: Whether it ran to the end.
func answeredHere(_ arguments: [String]) -> Bool {
    guard let command = ReadingCommand.recognize(arguments) else { return false }
    do {
        guard let client = try AgentClient.connect(socketPath: try AppPaths.forHome(command.home).agentSocket) else {
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
