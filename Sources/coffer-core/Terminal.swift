import CofferCommandLine
import CofferCrypto
import CofferKeymaker
import CofferReading

#if canImport(Glibc)
import Glibc
#endif

/// Terminal input and output: PINs without echo, presence confirmation on the controlling terminal.
enum Terminal {
    /// Prints `coffer: <sentence>` to standard error.
    static func printError(_ sentence: String) {
        var line = "coffer: \(sentence)\n"
        line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }

    /// Whether standard output is a terminal.
    static var isInteractiveOutput: Bool { isatty(1) == 1 }

    /// Reads a PIN: from standard input's first line with `fromStdin`, else from the controlling terminal without
    /// echo. The PIN never passes through argv, the environment or a `String` that outlives this call.
    static func readPIN(prompt: String, fromStdin: Bool) throws(CLIError) -> SecretBytes {
        try readSecret(prompt: prompt, what: "PIN", stdinOption: "--pin-stdin", fromStdin: fromStdin)
    }

    /// Reads a secret (`what`: "PIN", "passphrase") as ``readPIN(prompt:fromStdin:)`` does: from standard input's
    /// next line with `fromStdin`, else from the controlling terminal without echo; `stdinOption` is the option that
    /// asks for standard input.
    static func readSecret(
        prompt: String,
        what: String,
        stdinOption: String,
        fromStdin: Bool
    ) throws(CLIError) -> SecretBytes {
        let bytes: [UInt8]
        if fromStdin {
            guard let line = readLine(fd: 0) else { throw CLIError("No \(what) on standard input.") }
            bytes = line
        } else {
            let tty = open("/dev/tty", O_RDWR | O_CLOEXEC)
            guard tty >= 0 else {
                throw CLIError(
                    "There is no terminal to read the \(what) from; pass \(stdinOption) to read it from standard input."
                )
            }
            defer { close(tty) }
            writeString(prompt, to: tty)
            var original = termios()
            tcgetattr(tty, &original)
            var silent = original
            silent.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(tty, TCSAFLUSH, &silent)
            let line = readLine(fd: tty)
            tcsetattr(tty, TCSAFLUSH, &original)
            writeString("\n", to: tty)
            guard let line else { throw CLIError("No \(what) was entered.") }
            bytes = line
        }
        var copy = bytes
        defer { for index in copy.indices { copy[index] = 0 } }
        return SecretBytes(copying: copy)
    }

    /// Reads one line (without its newline) from `fd`, byte by byte so nothing beyond it is consumed.
    static func readLine(fd: Int32) -> [UInt8]? {
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let got = read(fd, &byte, 1)
            if got < 0 && errno == EINTR { continue }
            if got <= 0 { return line.isEmpty ? nil : line }
            if byte == 0x0A { break }
            line.append(byte)
            if line.count > 4096 { break }
        }
        if line.last == 0x0D { line.removeLast() }
        return line
    }

    /// Whether `fd` is a terminal that was hung up under this process (closed, or its session ended): Linux answers
    /// the ioctls of a hung-up terminal with EIO. A pipe or a file is not (ENOTTY).
    static func isHungUp(fd: Int32) -> Bool {
        var attributes = termios()
        return tcgetattr(fd, &attributes) != 0 && errno == EIO
    }

    static func writeString(_ text: String, to fd: Int32) {
        var copy = text
        copy.withUTF8 { _ = write(fd, $0.baseAddress, $0.count) }
    }
}

/// Confirms presence on the controlling terminal: the person types a random code shown there. A pipe or standard
/// input cannot answer, because the code is read from `/dev/tty`, and a process without a terminal is refused.
/// This proves that someone is at this terminal (presence), not who they are (identity).
struct TerminalPresence: PresenceAuthenticator {
    /// How long the prompt waits for the code before it counts as refused: the agent's own wait when it says, so a
    /// client never waits for a person after the agent gave up.
    var timeoutSeconds = 120

    func confirmPresence(reason: String) async -> Bool {
        let tty = open("/dev/tty", O_RDWR | O_CLOEXEC)
        guard tty >= 0 else {
            Terminal.printError("Presence cannot be confirmed: there is no terminal (a pipe cannot confirm presence).")
            return false
        }
        defer { close(tty) }
        var generator = SystemRandomNumberGenerator()
        let code = String(format4: Int(generator.next(upperBound: UInt32(10_000))))
        // Typed-ahead input is dropped before the code is shown, never after: an answer typed as soon as the code
        // appears must not be flushed away.
        tcflush(tty, TCIFLUSH)
        Terminal.writeString(
            "\(reason)\nSecure element: type \(code) and press Enter to confirm you are here "
                + "(this checks presence, not identity): ",
            to: tty
        )
        var ready = pollfd(fd: tty, events: Int16(POLLIN), revents: 0)
        let deadline = Int(max(1, timeoutSeconds)) * 1000
        var result: Int32
        repeat { result = poll(&ready, 1, Int32(clamping: deadline)) } while result < 0 && errno == EINTR
        guard result > 0 else {
            Terminal.writeString("\nNo answer in time; presence was not confirmed.\n", to: tty)
            return false
        }
        guard let line = Terminal.readLine(fd: tty) else { return false }
        return String(decoding: line, as: UTF8.self).trimmingSpaces == code
    }
}

extension String {
    init(format4 value: Int) {
        let digits = String(value)
        let padding = String(repeating: "0", count: Swift.max(0, 4 - digits.count))
        self = padding + digits
    }

    var trimmingSpaces: String {
        var text = Substring(self)
        while text.first == " " { text.removeFirst() }
        while text.last == " " { text.removeLast() }
        return String(text)
    }
}
