package links

import "encoding/base64"

// SignRaw MACs any payload as Sign would, so tests can make authentic
// tokens that Sign itself refuses to.
func SignRaw(key, payload []byte) string {
	p := base64.RawURLEncoding.EncodeToString(payload)
	return p + "." + base64.RawURLEncoding.EncodeToString(mac(key, p))
}
