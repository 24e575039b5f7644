package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/presence-im/presence/client"
	"github.com/presence-im/presence/webhook"
)

func TestVerifyWebhook(t *testing.T) {
	secret, body, now := []byte("0123456789abcdef"), []byte(`{"events":[]}`), time.Unix(1795947512, 0)
	sig := webhook.Sign(secret, body, now)
	if err := client.VerifyWebhook(secret, sig, body, now.Add(30*time.Second), time.Minute); err != nil {
		t.Fatalf("a good signature: %v", err)
	}
	for _, tc := range []struct {
		name   string
		secret []byte
		header string
		body   []byte
		at     time.Time
	}{
		{"another body", secret, sig, []byte(`{"events":[1]}`), now},
		{"another secret", []byte("fedcba9876543210"), sig, body, now},
		{"too old: a replay", secret, sig, body, now.Add(2 * time.Minute)},
		{"from the future", secret, sig, body, now.Add(-2 * time.Minute)},
		{"no v1", secret, "t=1795947512", body, now},
		{"not hex", secret, "t=1795947512,v1=zz", body, now},
		{"empty", secret, "", body, now},
	} {
		if err := client.VerifyWebhook(tc.secret, tc.header, tc.body, tc.at, time.Minute); !errors.Is(err, client.ErrBadSignature) {
			t.Errorf("%s: %v, want ErrBadSignature", tc.name, err)
		}
	}
}
