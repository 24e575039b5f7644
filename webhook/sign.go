package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"
)

// The headers of a delivery.
const (
	SignatureHeader = "X-Presence-Signature"
	DeliveryHeader  = "X-Presence-Delivery"
)

// Sign is the signature header of body sent at t: t=<unix s>,v1=<hex
// HMAC-SHA256 of "<t>.<body>">. A receiver checks it with
// client.VerifyWebhook.
func Sign(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(m.Sum(nil))
}
