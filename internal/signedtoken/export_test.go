package signedtoken

// SealLinkRaw signs any payload as a link, so tests can make authentic
// tokens that SignLink itself refuses to.
func (s *Signer) SealLinkRaw(payload []byte) string {
	return s.sealRaw(linkPurpose, payload)
}
