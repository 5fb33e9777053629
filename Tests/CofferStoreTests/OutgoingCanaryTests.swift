import CofferCrypto
import CofferMIME
import CofferTesting
import Foundation
import Testing

@testable import CofferStore

@Suite("Canary scan of drafts, contacts and the outbox")
struct OutgoingCanaryTests {
    @Test("no draft, contact, attachment or outbox canary reaches any file of the store, before or after a checkpoint")
    func canaryScan() async throws {
        let world = try await StoreWorld()
        let store = world.store
        let draftSubject = "CanaryDraftSubject7Q4"
        let draftBody = "CanaryDraftBody9X2 with more words"
        let contactName = "Canarycontactname Zyx"
        let contactAddress = "canary.contact.k8@example.org"
        let outboxSubject = "CanaryOutboxSubject3M1"
        let outboxBody = "CanaryOutboxBody5P6"
        let failure = "550 CanaryFailureReason2W8"
        var generator = SystemRandomNumberGenerator()
        let attachment = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let outboxAttachment = (0..<70_000).map { _ in UInt8.random(in: 0...255, using: &generator) }

        var content = sampleDraft(subject: draftSubject, text: draftBody)
        content.to = [MailAddress(name: contactName, address: contactAddress)]
        let draft = try await store.saveDraft(content)
        try await store.addDraftAttachment(to: draft, OutgoingAttachment(filename: "secret.bin", bytes: attachment))
        try await store.addContact(name: contactName, address: contactAddress)
        #expect(try await store.contacts(matching: "canaryc").count == 1)
        let sent = try await store.enqueue(
            outgoing(subject: outboxSubject, text: outboxBody, to: contactAddress, attachment: outboxAttachment),
            accountID: 1
        )
        let failed = try await store.enqueue(outgoing(subject: outboxSubject + "b"), accountID: 1)
        _ = try await store.claimNextDue()
        _ = try await store.claimNextDue()
        try await store.markSent(sent.id)
        try await store.markFailed(failed.id, reason: failure, permanent: true, retryAt: nil)
        #expect(
            try await store.draftAttachmentReader(try await store.draft(draft).attachments[0].id).readAll()
                == attachment
        )

        // The base64 of the outbox attachment as the message carries it, and raw slices of both attachments.
        let base64 = Array(Data(outboxAttachment.prefix(600)).base64EncodedString().prefix(60).utf8)
        var needles: [[UInt8]] = [
            draftSubject, draftBody, contactName, contactAddress, "Canarycontactname", outboxSubject, outboxBody,
            "CanaryFailureReason2W8", "secret.bin", "bob@example.org", "hidden@example.org",
        ].map { Array($0.utf8) }
        needles += [Array(attachment[1000..<1040]), Array(attachment.suffix(40)), Array(outboxAttachment[500..<540])]
        needles.append(base64)
        needles.append(try await world.keymaker.mainKey(for: .userRequest).withUnsafeBytes { Array($0) })

        let files = TemporaryDirectory.files(below: world.root.path)
        #expect(files.contains { $0.hasSuffix(".cfd") } && files.contains { $0.hasSuffix(".cfo") })
        #expect(CanaryScanner.occurrences(of: needles, under: [world.root.path]).isEmpty)
        try store.close()
        #expect(CanaryScanner.occurrences(of: needles, under: [world.root.path]).isEmpty)

        // The scanner finds them where they are in the clear.
        let clear = TemporaryDirectory(prefix: "coffer-outgoing-canary-control")
        let written = try MessageWriter.bytes(
            of: outgoing(subject: outboxSubject, text: outboxBody, to: contactAddress, attachment: outboxAttachment)
        )
        try SecureFile.writeAtomically(written.bytes + attachment, to: "\(clear.path)/control")
        let found = Set(CanaryScanner.occurrences(of: needles, under: [clear.path]).map(\.needle))
        #expect(found.isSuperset(of: [3, 5, 6, 11, 12, 14]))
    }
}
