package cluster

import (
	"crypto/tls"
	"errors"
	"net"
	"testing"

	"github.com/asynkron/protoactor-go/remote"
)

// handshake runs a TLS handshake between a server and a client config over
// loopback TCP (net.Pipe has no buffer, and both TLS 1.3 sides write at
// once) and returns the server's error (nil: the client got in).
func handshake(t *testing.T, server, client *tls.Config) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	done := make(chan error, 1)
	go func() {
		c := tls.Client(b, client)
		err := c.Handshake()
		if err == nil {
			// TLS 1.3 clients finish before the server checked their
			// certificate: read to learn the server's verdict.
			_, err = c.Read(make([]byte, 1))
		}
		b.Close()
		done <- err
	}()
	s := tls.Server(a, server)
	err = s.Handshake()
	if err == nil {
		_, _ = s.Write([]byte{1})
	}
	a.Close()
	<-done
	return err
}

// Members with the same key accept each other; a client with another key,
// with no certificate or that skips verification with a self-made one is
// refused by the server's certificate check.
func TestRemoteTLS(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	srvA, _, err := RemoteTLS(key)
	if err != nil {
		t.Fatal(err)
	}
	_, cliB, err := RemoteTLS(key) // another member: same CA, its own leaf
	if err != nil {
		t.Fatal(err)
	}
	_, cliOther, _ := RemoteTLS([]byte("another-key-of-32-bytes-00000000"))
	noCert := &tls.Config{ServerName: RemoteServerName, InsecureSkipVerify: true}
	selfMade := cliOther.Clone()
	selfMade.InsecureSkipVerify = true // trusts anything, but its cert chains to the wrong CA
	for _, c := range []struct {
		name   string
		client *tls.Config
		ok     bool
	}{{"member with the key", cliB, true}, {"other key", cliOther, false}, {"no certificate", noCert, false},
		{"wrong CA, not verifying", selfMade, false}} {
		err := handshake(t, srvA, c.client)
		if (err == nil) != c.ok {
			t.Errorf("%s: server handshake err = %v, want ok=%v", c.name, err, c.ok)
		}
	}
	if _, _, err := RemoteTLS(nil); !errors.Is(err, ErrNoClusterKey) {
		t.Errorf("empty key: %v", err)
	}
}

// Each remote endpoint's queue starts small, with or without a cluster key
// (proto.actor's default preallocates 16 MB per member: docs/architecture.md,
// "Memory"), and an option given still applies.
func TestRemoteConfigEndpointQueue(t *testing.T) {
	for _, key := range [][]byte{nil, []byte("0123456789abcdef")} {
		cfg, err := RemoteConfig("127.0.0.1", 0, key, remote.WithAdvertisedHost("h:1"))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.EndpointWriterQueueSize != EndpointQueue || cfg.AdvertisedHost != "h:1" {
			t.Fatalf("key %q: endpoint queue %d, advertised %q; want %d and h:1", key, cfg.EndpointWriterQueueSize, cfg.AdvertisedHost, EndpointQueue)
		}
	}
}
