//go:build !linux

package gateway

import "net/http"

// corkHandshake is Linux's TCP_CORK around the handshake's writes
// (cork_linux.go); elsewhere the 101 and the hello go as written.
func corkHandshake(http.ResponseWriter) (uncork func()) { return func() {} }
