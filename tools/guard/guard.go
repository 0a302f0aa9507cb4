// Package guard keeps the requests the model can steer (web pages, HTTP
// requests to APIs a person names) away from the machine loadout runs on
// and its networks. The check is made on the address a connection is
// about to use, at dial time, so a redirect or a DNS answer that changes
// between lookups (rebinding) cannot reach a private address either. An
// operator allowlist lets intranet hosts through.
package guard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Config configures a Guard. The zero value refuses every private
// address and resolves names with the system resolver.
type Config struct {
	// AllowHosts are let through though private (web.allow_hosts): host
	// names ("intranet.example.com", or "*.example.com" for its
	// subdomains), IP addresses and CIDR prefixes ("10.1.0.0/16").
	AllowHosts []string
	// LookupIP resolves a host name; default the system resolver.
	LookupIP func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Guard checks outbound addresses. It is safe for concurrent use.
type Guard struct {
	names    map[string]bool
	suffixes []string
	prefixes []netip.Prefix
	lookup   func(ctx context.Context, host string) ([]netip.Addr, error)
}

// New returns a guard; an allowlist entry that is neither a host name, an
// address nor a prefix is an error naming it.
func New(cfg Config) (*Guard, error) {
	g := &Guard{names: map[string]bool{}, lookup: cfg.LookupIP}
	if g.lookup == nil {
		g.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	for _, e := range cfg.AllowHosts {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "":
		case strings.Contains(e, "/"):
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("web.allow_hosts: %q is not a CIDR prefix", e)
			}
			g.prefixes = append(g.prefixes, p.Masked())
		case strings.HasPrefix(e, "*."):
			g.suffixes = append(g.suffixes, e[1:])
		default:
			if a, err := netip.ParseAddr(e); err == nil {
				g.prefixes = append(g.prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
				continue
			}
			if strings.ContainsAny(e, " :*@") {
				return nil, fmt.Errorf("web.allow_hosts: %q is not a host name, address or CIDR prefix", e)
			}
			g.names[e] = true
		}
	}
	return g, nil
}

// BlockedError is the refusal of an address.
type BlockedError struct {
	Host   string
	Addr   netip.Addr
	Reason string
}

func (e *BlockedError) Error() string {
	if e.Addr.IsValid() {
		return fmt.Sprintf("%s resolves to %s, a %s address, which is not reachable from here", e.Host, e.Addr, e.Reason)
	}
	return fmt.Sprintf("%s is not reachable from here: %s", e.Host, e.Reason)
}

// IsBlocked reports whether err is, or wraps, a refusal of the guard.
func IsBlocked(err error) bool {
	var b *BlockedError
	return errors.As(err, &b)
}

// CheckURL refuses, before any connection, a URL that is not http(s) or
// whose host is a private address written in any form, including the
// decimal, octal and hex forms of IPv4 that resolvers accept. Host names
// are checked when dialled.
func (g *Guard) CheckURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return &BlockedError{Host: u.Redacted(), Reason: "only http and https URLs can be fetched"}
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return &BlockedError{Host: u.Redacted(), Reason: "the URL has no host"}
	}
	if u.User != nil {
		return &BlockedError{Host: host, Reason: "URLs with credentials are not fetched"}
	}
	if g.hostAllowed(host) {
		return nil
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return &BlockedError{Host: host, Reason: "localhost"}
	}
	if a, ok := literalAddr(host); ok {
		if reason := g.refuse(a); reason != "" {
			return &BlockedError{Host: host, Addr: a, Reason: reason}
		}
	}
	return nil
}

// DialContext resolves addr's host, refuses it if any of its addresses is
// refused, and connects to the first that answers; the connection's
// actual address is checked again as it is made.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	host = strings.ToLower(host)
	allowed := g.hostAllowed(host)
	var addrs []netip.Addr
	if a, ok := literalAddr(host); ok {
		addrs = []netip.Addr{a}
	} else {
		if addrs, err = g.lookup(ctx, host); err != nil {
			return nil, err
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("guard: %s has no address", host)
	}
	if !allowed {
		for _, a := range addrs {
			if reason := g.refuse(a); reason != "" {
				return nil, &BlockedError{Host: host, Addr: a.Unmap(), Reason: reason}
			}
		}
	}
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowed {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &BlockedError{Host: host, Reason: "unreadable address " + address}
			}
			if reason := g.refuse(ap.Addr()); reason != "" {
				return &BlockedError{Host: host, Addr: ap.Addr().Unmap(), Reason: reason}
			}
			return nil
		}
	}
	var last error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// Transport is an HTTP transport whose every connection passes the guard.
// It never uses a proxy from the environment, which would connect on the
// guard's behalf.
func (g *Guard) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            g.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           16,
		IdleConnTimeout:        60 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  30 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

func (g *Guard) hostAllowed(host string) bool {
	host = strings.TrimSuffix(host, ".")
	if g.names[host] {
		return true
	}
	for _, s := range g.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// refuse names the kind of a refused address, "" for a public one or one
// the allowlist lets through.
func (g *Guard) refuse(a netip.Addr) string {
	a = a.Unmap()
	for _, p := range g.prefixes {
		if p.Contains(a) {
			return ""
		}
	}
	return kind(a)
}

// Special-purpose ranges refused besides those netip classifies.
var (
	cgnat     = netip.MustParsePrefix("100.64.0.0/10")
	thisNet   = netip.MustParsePrefix("0.0.0.0/8")
	ietf      = netip.MustParsePrefix("192.0.0.0/24")
	bench     = netip.MustParsePrefix("198.18.0.0/15")
	reserved  = netip.MustParsePrefix("240.0.0.0/4")
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	nat64L    = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour = netip.MustParsePrefix("2002::/16")
	// IETF protocol assignments: Teredo (2001::/32), benchmarking,
	// ORCHID and the rest; nothing a person asks for lives there.
	ietf6 = netip.MustParsePrefix("2001::/23")
	// The deprecated IPv4-compatible form ::a.b.c.d, and SIIT's
	// ::ffff:0:a.b.c.d, which some stacks still route to a.b.c.d.
	compatible = netip.MustParsePrefix("::/96")
	siit       = netip.MustParsePrefix("::ffff:0:0:0/96")
	siteLocal  = netip.MustParsePrefix("fec0::/10")
	discard    = netip.MustParsePrefix("100::/64")
	docs       = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("3fff::/20")}
)

// kind classifies an address that must not be reached, "" otherwise.
func kind(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "invalid"
	case a.IsUnspecified() || thisNet.Contains(a):
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local (cloud metadata)"
	case a.IsMulticast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast():
		return "multicast"
	case cgnat.Contains(a):
		return "shared (CGNAT)"
	case ietf.Contains(a), bench.Contains(a), reserved.Contains(a):
		return "reserved"
	case a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast"
	case slices.ContainsFunc(docs, func(p netip.Prefix) bool { return p.Contains(a) }):
		return "documentation"
	}
	if a.Is6() {
		b := a.As16()
		embedded := netip.AddrFrom4([4]byte(b[12:16]))
		// Addresses that carry an IPv4 address inside are judged by it.
		switch {
		case a.Is4In6():
			return kind(a.Unmap())
		case siit.Contains(a), nat64.Contains(a), nat64L.Contains(a):
			if k := kind(embedded); k != "" {
				return k
			}
			if nat64L.Contains(a) && !(b[8] == 0 && b[9] == 0 && b[10] == 0 && b[11] == 0) {
				return "reserved" // a local-use NAT64 prefix with more than an IPv4 address
			}
		case sixToFour.Contains(a):
			return kind(netip.AddrFrom4([4]byte(b[2:6])))
		case compatible.Contains(a):
			return "IPv4-compatible (deprecated)"
		case ietf6.Contains(a), discard.Contains(a):
			return "reserved"
		case siteLocal.Contains(a):
			return "site-local"
		}
	}
	return ""
}

// literalAddr reads host as an IP address: IPv6 (with or without
// brackets) or IPv4 in any form inet_aton accepts — dotted decimal, one
// to four parts, each decimal, octal (leading 0) or hex (leading 0x).
func literalAddr(host string) (netip.Addr, bool) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if i := strings.IndexByte(host, '%'); i >= 0 {
		host = host[:i] // a zone
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), true
	}
	parts := strings.Split(strings.TrimSuffix(host, "."), ".")
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		lp := strings.ToLower(p)
		if p == "" || strings.ContainsAny(p, "_+-") || strings.HasPrefix(lp, "0b") || strings.HasPrefix(lp, "0o") {
			return netip.Addr{}, false
		}
		v, err := strconv.ParseUint(p, 0, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	// The last part fills the bytes the others leave.
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (24 - 8*uint(i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*uint(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}
