// Package js holds the browser SDK (presence.js and its types,
// presence.d.ts) and the demo page (demo.html), embedded so that every
// node serves them from its device listener (gateway/sdk.go).
package js

import "embed"

// Files are presence.js, presence.d.ts and demo.html.
//
//go:embed presence.js presence.d.ts demo.html
var Files embed.FS
