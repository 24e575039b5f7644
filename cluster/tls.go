package cluster

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// RemoteServerName is the name every member's leaf certificate carries and
// every member checks when it dials another: members are told apart by
// their actor system id, not by certificate, so one name serves them all
// (and addresses, which change with every restart, stay out of it).
const RemoteServerName = "presence-member"

// ErrNoClusterKey is returned by RemoteTLS for an empty key.
var ErrNoClusterKey = errors.New("cluster: no cluster key to derive remote credentials from")

// RemoteTLS derives the mutual-TLS configuration of the proto.actor remote
// (the gRPC transport between members) from the cluster key, so that the
// one secret that lets a process into the gossip is also the only way into
// the actor transport:
//
//   - the cluster CA's Ed25519 key is HKDF-SHA256(key, info
//     "presence remote ca v1"); its self-signed certificate has fixed
//     fields, and Ed25519 signatures are deterministic, so every member
//     derives the identical CA certificate without exchanging anything;
//   - each member makes a fresh Ed25519 leaf key at start and signs its leaf
//     certificate with the derived CA key;
//   - both sides require a certificate chaining to that CA (TLS 1.3 only).
//
// A process without the key can neither present a certificate the members
// accept nor verify theirs, so it cannot send or receive an actor message.
// The derivation uses its own HKDF label: the memberlist AES key (the raw
// cluster key) and the CA key never share bytes.
func RemoteTLS(key []byte) (server, client *tls.Config, err error) {
	if len(key) == 0 {
		return nil, nil, ErrNoClusterKey
	}
	seed, err := hkdf.Key(sha256.New, key, nil, "presence remote ca v1", ed25519.SeedSize)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: deriving the remote CA: %w", err)
	}
	caKey := ed25519.NewKeyFromSeed(seed)
	// Fixed fields: the same key gives the same certificate on every node.
	epoch := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "presence cluster CA"},
		NotBefore: epoch, NotAfter: epoch.AddDate(100, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(nil, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: remote CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	leaf, err := leafCert(ca, caKey)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	server = &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{leaf},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	client = &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{leaf},
		RootCAs: pool, ServerName: RemoteServerName}
	return server, client, nil
}

// EndpointQueue is the initial size, in messages, of the queue of each
// remote endpoint (one per other member). proto.actor's default, a million
// slots, allocates 16 MB per member at once: never touched at first, so
// not resident, but counted as live heap, so that the collector let the
// heap grow by as much again before collecting (GOGC), and filled page by
// page as the ring's head walks round it, so that RSS grew with the
// messages ever sent to a member (docs/architecture.md, "Memory"). The
// queue doubles when full, so a burst still queues everything.
const EndpointQueue = 1024

// RemoteConfig is the proto.actor remote of a member, on host and port
// (0: a free one), with opts: with a cluster key, mutual TLS from
// RemoteTLS; without one, plaintext, as the gossip is then (a node off
// loopback refuses to start so unless told --insecure). Both ends count
// their bytes and connections (RegisterTraffic). The dial options replace
// the remote's default (grpc.WithInsecure) rather than adding to it. Each
// endpoint's queue starts at EndpointQueue.
func RemoteConfig(host string, port int, key []byte, opts ...remote.ConfigOption) (*remote.Config, error) {
	opts = append([]remote.ConfigOption{remote.WithEndpointWriterQueueSize(EndpointQueue)}, opts...)
	srvOpts := []grpc.ServerOption{grpc.StatsHandler(statsHandler{side: "server"})}
	dialOpts := []grpc.DialOption{grpc.WithStatsHandler(statsHandler{side: "client"})}
	if len(key) == 0 {
		dialOpts = append(dialOpts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	} else {
		srv, cli, err := RemoteTLS(key)
		if err != nil {
			return nil, err
		}
		srvOpts = append(srvOpts, grpc.Creds(credentials.NewTLS(srv)))
		dialOpts = append(dialOpts, grpc.WithTransportCredentials(credentials.NewTLS(cli)))
	}
	opts = append(opts, remote.WithServerOptions(srvOpts...), remote.WithDialOptions(dialOpts...))
	return remote.Configure(host, port, opts...), nil
}

// leafCert is this member's certificate, for both serving and dialing, on
// a key that never leaves the process.
func leafCert(ca *x509.Certificate, caKey ed25519.PrivateKey) (tls.Certificate, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: RemoteServerName}, DNSNames: []string{RemoteServerName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("cluster: member certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}, nil
}
