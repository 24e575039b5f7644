package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/presence-im/presence/core"
)

// ErrBadToken is wrapped by every token verification failure (HTTP 401).
var ErrBadToken = errors.New("gateway: bad token")

// Tokens mints and verifies device tokens: HMAC-SHA256 with the node's
// secret over user, device and expiry.
//
//	token = base64url(user "\n" device "\n" expiry-unix) "." base64url(hmac)
type Tokens struct {
	Key []byte
	// Previous are older keys whose tokens still verify while they live
	// out their expiry (secret rotation); Mint signs with Key only.
	Previous [][]byte
	Now      func() time.Time // nil: time.Now
}

// Claims are what a valid token says.
type Claims struct {
	User, Device string
	Expires      time.Time
}

func (t Tokens) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

func (t Tokens) mac(payload []byte) []byte { return mac(t.Key, payload) }

// signedBy reports whether sig is payload's MAC under the current key or
// a previous one; each comparison is constant-time.
func (t Tokens) signedBy(payload, sig []byte) bool {
	ok := hmac.Equal(sig, t.mac(payload))
	for _, k := range t.Previous {
		ok = hmac.Equal(sig, mac(k, payload)) || ok
	}
	return ok
}

func mac(key, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(payload)
	return m.Sum(nil)
}

// Mint returns a token for (user, device) valid for ttl.
func (t Tokens) Mint(user, device string, ttl time.Duration) (string, error) {
	if err := errors.Join(core.ValidID("user", user), core.ValidID("device", device)); err != nil {
		return "", err
	}
	if ttl <= 0 {
		return "", fmt.Errorf("gateway: token ttl %v: must be > 0", ttl)
	}
	payload := []byte(user + "\n" + device + "\n" + strconv.FormatInt(t.now().Add(ttl).Unix(), 10))
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(t.mac(payload)), nil
}

// Verify checks a token's MAC in constant time, then its expiry and ids.
func (t Tokens) Verify(token string) (Claims, error) {
	enc := base64.RawURLEncoding
	p64, m64, ok := strings.Cut(token, ".")
	if !ok {
		return Claims{}, fmt.Errorf("%w: malformed", ErrBadToken)
	}
	payload, err1 := enc.DecodeString(p64)
	sig, err2 := enc.DecodeString(m64)
	if err1 != nil || err2 != nil {
		return Claims{}, fmt.Errorf("%w: malformed", ErrBadToken)
	}
	if !t.signedBy(payload, sig) {
		return Claims{}, fmt.Errorf("%w: signature", ErrBadToken)
	}
	parts := strings.Split(string(payload), "\n")
	if len(parts) != 3 {
		return Claims{}, fmt.Errorf("%w: malformed", ErrBadToken)
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: malformed expiry", ErrBadToken)
	}
	c := Claims{User: parts[0], Device: parts[1], Expires: time.Unix(exp, 0)}
	if !t.now().Before(c.Expires) {
		return Claims{}, fmt.Errorf("%w: expired at %s", ErrBadToken, c.Expires.UTC().Format(time.RFC3339))
	}
	if err := errors.Join(core.ValidID("user", c.User), core.ValidID("device", c.Device)); err != nil {
		return Claims{}, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	return c, nil
}
