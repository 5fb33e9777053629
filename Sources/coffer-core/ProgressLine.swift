import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#endif

/// A progress display redrawn in place on one terminal line, used by `coffer import` and `coffer sync`. It draws
/// only when its file descriptor is a terminal, so nothing of it reaches a pipe, a file or a test's capture.
final class ProgressLine: Sendable {
    private let descriptor: Int32
    /// Whether the line is drawn (the descriptor is a terminal).
    let isActive: Bool
    private let drawn = NIOLockedValueBox(false)

    /// A line on `descriptor` (standard error by default).
    init(descriptor: Int32 = 2) {
        self.descriptor = descriptor
        isActive = isatty(descriptor) == 1
    }

    /// Replaces the line with `text` (erasing what was longer).
    func show(_ text: String) {
        guard isActive else { return }
        drawn.withLockedValue { $0 = true }
        fflush(nil)
        emit("\r" + text + "\u{1B}[K")
    }

    /// `label [#####.....] done/total`, the bar `width` characters wide; an unknown total shows the count alone.
    static func bar(_ label: String, done: Int, total: Int, width: Int = 30) -> String {
        guard total > 0 else { return "\(label) \(done)" }
        let clamped = min(max(done, 0), total)
        let filled = clamped * width / total
        return "\(label) [" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            + "] \(clamped)/\(total)"
    }

    /// Ends the line (a newline if anything was drawn), so that the next output starts on a line of its own.
    func finish() {
        guard
            drawn.withLockedValue({ value in
                defer { value = false }
                return value
            })
        else { return }
        emit("\n")
    }

    private func emit(_ text: String) {
        var bytes = text
        bytes.withUTF8 { buffer in _ = write(descriptor, buffer.baseAddress, buffer.count) }
    }
}
