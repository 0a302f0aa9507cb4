package guard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// names is a resolver for the tests: every name not listed is unknown.
func names(m map[string]string) func(ctx context.Context, host string) ([]netip.Addr, error) {
	return func(ctx context.Context, host string) ([]netip.Addr, error) {
		a, ok := m[host]
		if !ok {
			return nil, fmt.Errorf("no such host %s", host)
		}
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
}

// Hostile URLs are refused before any connection when their host is an
// address, and at dial time when a name resolves to one.
func TestHostileURLsAreRefused(t *testing.T) {
	g, err := New(Config{LookupIP: names(map[string]string{
		"rebind.example":   "127.0.0.1",
		"metadata.example": "169.254.169.254",
		"inner.example":    "10.0.0.5",
		"mapped.example":   "::ffff:192.168.1.1",
		"nat64.example":    "64:ff9b::a9fe:a9fe",
	})})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: g.Transport()}
	hostile := []string{
		"http://127.0.0.1/", "http://127.1/", "http://2130706433/", "http://0x7f000001/", "http://0177.0.0.1/",
		"http://0x7f.0.0.1/", "http://017700000001/", "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/",
		"http://localhost/", "http://api.localhost/", "http://0.0.0.0/", "http://[::]/", "http://10.1.2.3/",
		"http://172.16.0.1/", "http://192.168.0.1/", "http://169.254.169.254/latest/meta-data/", "http://100.64.0.1/",
		"http://100.100.100.200/", "http://[fd00:ec2::254]/", "http://[fe80::1]/", "http://224.0.0.1/", "http://[ff02::1]/",
		"http://[2002:7f00:1::]/", "http://[64:ff9b::7f00:1]/", "http://255.255.255.255/", "http://198.18.0.1/",
		"file:///etc/passwd", "gopher://127.0.0.1/", "http://user:pw@example.com/",
		"http://rebind.example/", "http://metadata.example/", "http://inner.example/", "http://mapped.example/", "http://nat64.example/",
	}
	for _, raw := range hostile {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		early := g.CheckURL(u)
		var dialed error
		if early == nil {
			// A name: only the connection can tell.
			_, dialed = client.Get(raw)
		}
		if early == nil && !IsBlocked(dialed) {
			t.Errorf("%s was not refused (check %v, dial %v)", raw, early, dialed)
		}
		if early == nil && !strings.HasSuffix(u.Hostname(), ".example") {
			t.Errorf("%s passed the early check", raw)
		}
	}
}

// A redirect from an allowed host into 127.0.0.1 is refused when the
// redirect is dialled.
func TestRedirectIntoLoopbackIsRefusedAtDial(t *testing.T) {
	secret := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the private server was reached")
	}))
	defer secret.Close()
	public := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a":
			http.Redirect(w, r, "/b", http.StatusFound) // same host: fine
		case "/b":
			http.Redirect(w, r, secret.URL+"/secret", http.StatusFound)
		}
	}))
	defer public.Close()
	pu, _ := url.Parse(public.URL)
	g, err := New(Config{AllowHosts: []string{"public.example"}, LookupIP: names(map[string]string{"public.example": "127.0.0.1"})})
	if err != nil {
		t.Fatal(err)
	}
	hops := 0
	client := &http.Client{Transport: g.Transport(), CheckRedirect: func(req *http.Request, via []*http.Request) error {
		hops++
		return nil
	}}
	_, err = client.Get("http://public.example:" + pu.Port() + "/a")
	var b *BlockedError
	if !errors.As(err, &b) || b.Addr != netip.MustParseAddr("127.0.0.1") || b.Reason != "loopback" {
		t.Fatalf("the redirect chain ended with %v, want a loopback refusal", err)
	}
	if hops != 2 {
		t.Errorf("%d redirects followed before the refusal, want 2", hops)
	}
}

// The allowlist lets intranet names, addresses and prefixes through, and
// a bad entry is an error naming it.
func TestAllowHosts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	g, err := New(Config{AllowHosts: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: g.Transport()}).Get(srv.URL)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("an allowed prefix was refused: %v", err)
	}
	resp.Body.Close()
	if u, _ := url.Parse("http://10.0.0.1/"); g.CheckURL(u) == nil {
		t.Error("10.0.0.1 passed though only 127.0.0.0/8 is allowed")
	}
	for _, bad := range []string{"10.0.0.0/33", "a b", "user@host"} {
		if _, err := New(Config{AllowHosts: []string{bad}}); err == nil || !strings.Contains(err.Error(), "web.allow_hosts") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	g, _ = New(Config{AllowHosts: []string{"*.corp.example"}, LookupIP: names(map[string]string{"wiki.corp.example": "10.0.0.7"})})
	if u, _ := url.Parse("http://wiki.corp.example/"); g.CheckURL(u) != nil {
		t.Error("a subdomain of an allowed suffix was refused")
	}
}

func TestPublicAddressesPass(t *testing.T) {
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "93.184.216.34"} {
		if k := kind(netip.MustParseAddr(a)); k != "" {
			t.Errorf("%s refused as %s", a, k)
		}
	}
	if a, ok := literalAddr("0x7f.1"); !ok || a != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("0x7f.1 read as %v %v", a, ok)
	}
	for _, notIP := range []string{"example.com", "1.2.3.4.5", "0b1", "1_0", "256.1.1.1", "1.2.3.256"} {
		if a, ok := literalAddr(notIP); ok {
			t.Errorf("%s read as the address %s", notIP, a)
		}
	}
}

// internal is every form of an address the model must not reach: IPv4
// ranges, IPv6 ranges, and each IPv6 form that carries an internal IPv4
// address. Found by probing: ::ffff:0:7f00:1 (SIIT), ::127.0.0.1
// (IPv4-compatible) and fec0::/10 (site-local) passed.
var internal = []string{
	// IPv4
	"127.0.0.1", "127.255.255.254", "0.0.0.0", "0.1.2.3", "10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.255",
	"192.168.0.1", "169.254.169.254", "100.64.0.1", "100.127.255.254", "192.0.0.8", "192.0.2.10", "198.51.100.7",
	"203.0.113.9", "198.18.0.1", "198.19.255.254", "224.0.0.1", "239.255.255.250", "240.0.0.1", "255.255.255.255",
	// IPv6
	"::1", "::", "fe80::1", "fe80::a9fe:a9fe", "fec0::1", "feff::1", "fc00::1", "fd00:ec2::254", "ff02::1", "ff05::2",
	"2001:db8::1", "2001:db8:ffff::1", "3fff::1", "100::1", "2001:2::1", "2001:10::1", "2001:20::1",
	// IPv4 inside IPv6
	"::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", // mapped
	"::127.0.0.1", "::10.0.0.1", "::169.254.169.254", "::192.168.1.1", // compatible
	"::ffff:0:127.0.0.1", "::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe", "::ffff:0:10.1.2.3", // SIIT
	"64:ff9b::127.0.0.1", "64:ff9b::a9fe:a9fe", "64:ff9b::10.0.0.1", "64:ff9b:1::7f00:1", "64:ff9b:1:ffff::a00:1", // NAT64
	"2002:7f00:1::", "2002:a9fe:a9fe::1", "2002:c0a8:101::1", // 6to4
	"2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::1", // Teredo
}

func TestEveryFormOfAnInternalAddressIsRefusedAtDial(t *testing.T) {
	if len(internal) < 50 {
		t.Fatalf("the table has %d addresses", len(internal))
	}
	m := map[string]string{}
	for i, a := range internal {
		m[fmt.Sprintf("h%d.example", i)] = a
	}
	g, err := New(Config{LookupIP: names(m)})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: g.Transport()}
	for i, a := range internal {
		host := fmt.Sprintf("h%d.example", i)
		if _, err := client.Get("http://" + host + "/"); !IsBlocked(err) {
			t.Errorf("%s (through %s) was not refused at dial: %v", a, host, err)
		}
		u, _ := url.Parse("http://" + netip.AddrPortFrom(netip.MustParseAddr(a), 80).String() + "/")
		if err := g.CheckURL(u); !IsBlocked(err) {
			t.Errorf("%s as a literal passed the early check", a)
		}
	}
	// Their public neighbours pass.
	for _, a := range []string{"::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "2606:4700:4700::1111", "2a00:1450:4001::200e"} {
		if k := kind(netip.MustParseAddr(a)); k != "" {
			t.Errorf("%s refused as %s", a, k)
		}
	}
}
