package manager

import "crypto/tls"

// minTLSVersion is the oldest TLS version the webhook server accepts. Go's
// servers default to TLS 1.2 too, but a GODEBUG setting (tls10server=1) in
// the manager's environment would lower that default; set here, it holds
// whatever the environment says. The apiserver speaks TLS 1.2 and 1.3.
const minTLSVersion = tls.VersionTLS12

// requireModernTLS refuses handshakes older than minTLSVersion.
func requireModernTLS(cfg *tls.Config) {
	cfg.MinVersion = minTLSVersion
}
