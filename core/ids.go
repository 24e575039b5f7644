package core

import (
	"errors"
	"fmt"
	"strings"
)

// ErrBadID is wrapped when a user or device id is not acceptable.
var ErrBadID = errors.New("core: bad id")

// MaxIDLen is the longest user or device id.
const MaxIDLen = 128

// ValidID checks a user or device id: 1 to 128 bytes of ASCII letters,
// digits and . _ - @ : (so no "/", which separates identities, no control,
// bidi or other non-ASCII characters that would print as something else),
// and no "..", which a path or URL would read as the parent.
func ValidID(kind, id string) error {
	if id == "" || len(id) > MaxIDLen {
		return fmt.Errorf("%w: %s id must be 1 to %d bytes, got %d", ErrBadID, kind, MaxIDLen, len(id))
	}
	if strings.Contains(id, "..") {
		return fmt.Errorf("%w: %s id %q has \"..\"", ErrBadID, kind, id)
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '.' || r == '_' || r == '-' || r == '@' || r == ':'
		if !ok {
			return fmt.Errorf("%w: %s id %q has %q: only letters, digits and . _ - @ : are allowed", ErrBadID, kind, id, r)
		}
	}
	return nil
}
