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

@Suite("TPM PIN binding record v1")
struct TPMPINBindingRecordTests {
    func makeBinding() throws -> TPMPINBinding {
        TPMPINBinding(
            sealedShare: TPMSealedObject(publicArea: [0x00, 0x01, 7], privateArea: [0x00, 0x01, 8]),
            counter: try TPMNVCounter(index: 0x0101_0203)
        )
    }

    @Test func roundTripsInTheDocumentedLayout() throws {
        let binding = try makeBinding()
        let bytes = binding.serialized
        #expect(Array(bytes.prefix(9)) == Array("CFTB".utf8) + [0x01, 0x01, 0x01, 0x02, 0x03])
        #expect(Array(bytes.dropFirst(9)) == binding.sealedShare.serialized)
        #expect(try TPMPINBinding(serialized: bytes) == binding)
    }

    @Test func everyTruncationAndAnIndexOutsideTheOwnerRangeAreMalformed() throws {
        let bytes = try makeBinding().serialized
        for count in 0..<bytes.count {
            #expect(throws: TPMError.self) { _ = try TPMPINBinding(serialized: Array(bytes.prefix(count))) }
        }
        var outside = bytes
        outside[5] = 0x81
        #expect(throws: TPMError.malformed(what: "TPM PIN binding record")) {
            _ = try TPMPINBinding(serialized: outside)
        }
    }
}
