import CRNP
import CofferBlocking

extension OpenPGPPublicKey {
    /// The minimal certificate Autocrypt Level 1 puts in the `Autocrypt` header's `keydata`: the primary key, the
    /// user id `userID` and the first valid encryption subkey, each with its self-signature, in binary form
    /// (`rnp_key_export_autocrypt`).
    ///
    /// Blocking: call on `BlockingPool`.
    ///
    /// - Parameter userID: One of ``userIDs``, exactly as listed.
    /// - Throws: ``OpenPGPError/noEncryptionKey(fingerprint:)`` when no subkey can be encrypted to;
    ///   ``OpenPGPError/invalidArgument(reason:)`` for a user id that is not the key's.
    public func autocryptKeyData(userID: String) throws(OpenPGPError) -> [UInt8] {
        guard userIDs.contains(userID) else {
            throw .invalidArgument(reason: "the user id is not one of the key's valid user ids")
        }
        guard canEncrypt else { throw .noEncryptionKey(fingerprint: fingerprint) }
        let certificate = bytes
        return try RNPSession.with { session throws(OpenPGPError) in
            try withRawBytes(certificate) { raw throws(OpenPGPError) in
                try session.importKeys(raw, secret: false, what: "key")
            }
            let key = try session.locate(fingerprint: fingerprint)
            let output = ZeroingBuffer(limit: Int.max)
            try RNPOutput.with(output, operation: "Autocrypt key export") { out throws(OpenPGPError) in
                let code = rnp_key_export_autocrypt(key.handle, nil, userID, out, 0)
                guard code == RNPCode.success else {
                    throw OpenPGPError.noEncryptionKey(fingerprint: fingerprint)
                }
            }
            return output.bytes
        }
    }
}
