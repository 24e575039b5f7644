package cluster

import (
	"context"
	"fmt"
	"net"

	sockaddr "github.com/hashicorp/go-sockaddr"
)

// Advertised is the ip:port the others are told to reach a socket bound
// at bind by: advertise ("host" or "host:port"; a name is resolved once,
// here, since memberlist wants an IP), else bind's own host, else, when
// bind's host is unspecified (0.0.0.0, ::), this host's private IP as
// memberlist would pick it. A port missing from advertise is bind's. ""
// when bind's address is already the one to use.
func Advertised(ctx context.Context, advertise, bind string) (string, error) {
	bindHost, bindPort, err := net.SplitHostPort(bind)
	if err != nil {
		return "", fmt.Errorf("cluster: bind address %q: %w", bind, err)
	}
	host, port := advertise, bindPort
	if h, p, err := net.SplitHostPort(advertise); err == nil {
		host, port = h, p
	}
	switch {
	case host != "":
	case Unspecified(bindHost):
		if host, err = sockaddr.GetPrivateIP(); err != nil || host == "" {
			return "", fmt.Errorf("cluster: %s binds every interface and no private IP was found to advertise (%v): set --advertise", bind, err)
		}
	default:
		return "", nil
	}
	if net.ParseIP(host) == nil {
		ips, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil || len(ips) == 0 {
			return "", fmt.Errorf("cluster: advertise host %q: %v", host, err)
		}
		host = ips[0]
		for _, ip := range ips { // "localhost" may come as ::1 first
			if net.ParseIP(ip).To4() != nil {
				host = ip
				break
			}
		}
	}
	return net.JoinHostPort(host, port), nil
}

// Unspecified reports whether a bind host means every interface.
func Unspecified(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}
