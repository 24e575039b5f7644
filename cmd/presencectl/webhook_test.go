package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/presence-im/presence/webhook"
)

// The test receiver prints what is signed right, counts what is not newer
// as a duplicate, and refuses a bad signature or an old one (401).
func TestWebhookListener(t *testing.T) {
	secret := []byte("0123456789abcdef0123")
	var out bytes.Buffer
	l := &listener{secret: secret, window: time.Minute, out: &out, latest: map[string]uint64{}}
	post := func(body string, at time.Time, key []byte) int {
		r := httptest.NewRequest("POST", "/", strings.NewReader(body))
		r.Header.Set(webhook.SignatureHeader, webhook.Sign(key, []byte(body), at))
		r.Header.Set(webhook.DeliveryHeader, "d1")
		w := httptest.NewRecorder()
		l.ServeHTTP(w, r)
		return w.Code
	}
	body := `{"events":[{"user":"alice","status":"online","version":5,"show":"away","devices":[{"device":"phone","platform":"mobile","activity":"background","node":"n1"}]},{"user":"alice","status":"online","version":5}]}`
	if code := post(body, time.Now(), secret); code != http.StatusOK {
		t.Fatalf("a signed batch: %d\n%s", code, out.String())
	}
	if l.dups != 1 || !strings.Contains(out.String(), "alice online v5 away [phone:mobile:background@n1]") {
		t.Fatalf("dups %d, output:\n%s", l.dups, out.String())
	}
	if code := post(body, time.Now(), []byte("another-secret-of-16")); code != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %d", code)
	}
	if code := post(body, time.Now().Add(-2*time.Minute), secret); code != http.StatusUnauthorized || !strings.Contains(out.String(), "outside the window") {
		t.Fatalf("a replay: %d\n%s", code, out.String())
	}
}
