import CofferTPM
import Testing

@Suite("TPM sealed object record v1")
struct TPMSealedObjectRecordTests {
    let object = TPMSealedObject(publicArea: [0x00, 0x03, 1, 2, 3], privateArea: [0x00, 0x02, 9, 8])

    @Test func roundTripsInTheDocumentedLayout() throws {
        let bytes = object.serialized
        #expect(bytes == Array("CFTP".utf8) + [0x01, 0x00, 0x05, 0x00, 0x03, 1, 2, 3, 0x00, 0x04, 0x00, 0x02, 9, 8])
        #expect(try TPMSealedObject(serialized: bytes) == object)
    }

    @Test func everyTruncationAndEveryExtraByteIsMalformed() {
        let bytes = object.serialized
        for count in 0..<bytes.count {
            #expect(throws: TPMError.malformed(what: "TPM sealed object record")) {
                _ = try TPMSealedObject(serialized: Array(bytes.prefix(count)))
            }
        }
        #expect(throws: TPMError.malformed(what: "TPM sealed object record")) {
            _ = try TPMSealedObject(serialized: bytes + [0])
        }
    }

    @Test(arguments: [0, 1, 2, 3, 4])
    func anotherMagicOrVersionIsMalformed(position: Int) {
        var bytes = object.serialized
        bytes[position] ^= 0x20
        #expect(throws: TPMError.malformed(what: "TPM sealed object record")) {
            _ = try TPMSealedObject(serialized: bytes)
        }
    }

    @Test func emptyAreasAreMalformed() {
        let empty = TPMSealedObject(publicArea: [], privateArea: [1])
        #expect(throws: TPMError.malformed(what: "TPM sealed object record")) {
            _ = try TPMSealedObject(serialized: empty.serialized)
        }
    }
}
