package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrBadSignature is wrapped by every refusal of VerifyWebhook.
var ErrBadSignature = errors.New("client: webhook signature")

// VerifyWebhook checks a presence webhook delivery: header is its
// X-Presence-Signature (t=<unix s>,v1=<hex HMAC-SHA256 of "<t>.<body>">),
// body the raw request body, secret the endpoint's --webhook-secret. It
// refuses a signature that does not match and one whose time is more than
// window from now (a replay; 5 minutes is a good window). A receiver that
// keeps the highest version per user needs nothing more:
//
//	body, _ := io.ReadAll(r.Body)
//	if err := client.VerifyWebhook(secret, r.Header.Get("X-Presence-Signature"), body, time.Now(), 5*time.Minute); err != nil {
//		http.Error(w, err.Error(), http.StatusUnauthorized) // a 4xx is not retried
//		return
//	}
func VerifyWebhook(secret []byte, header string, body []byte, now time.Time, window time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return fmt.Errorf("%w: header %q: want t=<unix s>,v1=<hex>", ErrBadSignature, header)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > window || d < -window {
		return fmt.Errorf("%w: signed at %d, %v from now: outside the window of %v", ErrBadSignature, sec, d.Round(time.Second), window)
	}
	want, err := hex.DecodeString(sig)
	if err != nil {
		return fmt.Errorf("%w: v1 is not hex", ErrBadSignature)
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts + "."))
	m.Write(body)
	if !hmac.Equal(m.Sum(nil), want) {
		return fmt.Errorf("%w: does not match the body", ErrBadSignature)
	}
	return nil
}
