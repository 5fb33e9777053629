import ArgumentParser
import CofferCrypto
import CofferKeychain
import CofferKeymaker

#if canImport(Glibc)
import Glibc
#endif

/// An error for the person at the terminal: one sentence, printed to standard error.
struct CLIError: Error, CustomStringConvertible {
    let description: String

    init(_ sentence: String) { description = sentence }

    /// The sentence for any error the modules throw; their descriptions never contain secrets.
    init(wrapping error: any Error) {
        if let error = error as? CLIError {
            self = error
        } else if let error = error as? CustomStringConvertible {
            description = error.description
        } else {
            description = "An unexpected error occurred."
        }
    }
}

/// Runs a command body; any error becomes one sentence on standard error and exit status 1.
func runReportingErrors(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let exit as ExitCode {
        throw exit
    } catch {
        Terminal.printError(CLIError(wrapping: error).description)
        throw ExitCode(1)
    }
}
