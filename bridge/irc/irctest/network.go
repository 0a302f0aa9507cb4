// Package irctest runs a real IRC network for the IRC channel's tests:
// InspIRCd 3 with Anope 2 linked to it as services (accounts, SASL,
// account-tag), on 127.0.0.1 in a temporary directory, as an
// unprivileged user when the tests run as root; and the people who talk
// to the bot there, each a small raw IRC client of their own. The
// binaries come from Debian's packages inspircd and anope; without
// them the tests that need a network skip, saying how to install them.
package irctest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"loadout/bridge/bridgetest"
)

// HowToGet says how to install the network's binaries.
const HowToGet = "install them with: apt-get install -y inspircd anope (.ci/run does this)"

// Network is a running InspIRCd with Anope linked as its services.
type Network struct {
	// Plain and TLS are the client ports' addresses (host:port).
	Plain, TLS string
	// CAFile is the PEM certificate the TLS port presents, to trust.
	CAFile string

	dir   string
	procs []*exec.Cmd
	mu    sync.Mutex
	made  map[string]bool
}

// Shared is one Network for a test binary: the first Get starts it,
// Close stops it. The zero value is ready.
type Shared struct {
	once sync.Once
	n    *Network
	err  error
}

var errNoBinaries = errors.New("no IRC server binaries")

// Get returns the shared network, starting it on the first call; t
// skips when the binaries are missing and fails when it cannot start.
func (sh *Shared) Get(t testing.TB) *Network {
	t.Helper()
	sh.once.Do(func() { sh.n, sh.err = Start() })
	if errors.Is(sh.err, errNoBinaries) {
		t.Skipf("no IRC network to test against: %v; %s", sh.err, HowToGet)
	} else if sh.err != nil {
		t.Fatalf("irc network: %v", sh.err)
	}
	return sh.n
}

// Close stops the shared network and removes its files.
func (sh *Shared) Close() {
	if sh.n != nil {
		sh.n.Close()
	}
}

// Start runs the network and returns once the services are linked (the
// server then offers SASL).
func Start() (*Network, error) {
	const ircd, anope = "/usr/sbin/inspircd", "/usr/sbin/anope"
	for _, bin := range []string{ircd, anope} {
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("%w: %v", errNoBinaries, err)
		}
	}
	dir, err := os.MkdirTemp("", "irctest-")
	var ports []int
	var ls []net.Listener
	for range 3 { // free ports: three listeners open at once, then closed
		l, lerr := net.Listen("tcp", "127.0.0.1:0")
		if err = errors.Join(err, lerr); err != nil {
			return nil, err
		}
		ports, ls = append(ports, l.Addr().(*net.TCPAddr).Port), append(ls, l)
	}
	for _, l := range ls {
		l.Close()
	}
	n := &Network{Plain: fmt.Sprintf("127.0.0.1:%d", ports[0]), TLS: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		CAFile: filepath.Join(dir, "cert.pem"), dir: dir, made: map[string]bool{}}
	for name, body := range map[string]string{"inspircd.conf": inspircdConf(dir, ports), "services.conf": anopeConf(dir, ports[2]), "motd": "test\n"} {
		err = errors.Join(err, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600))
	}
	// A self-signed certificate for 127.0.0.1, the TLS port's.
	if out, cerr := exec.Command("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
		"-keyout", filepath.Join(dir, "key.pem"), "-out", n.CAFile, "-days", "2", "-subj", "/CN=127.0.0.1",
		"-addext", "subjectAltName=IP:127.0.0.1").CombinedOutput(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("openssl: %v: %s", cerr, out))
	}
	if err == nil {
		err = n.run(ircd, "--config", filepath.Join(dir, "inspircd.conf"), "--nofork", "--nopid")
	}
	if err == nil {
		err = n.run(anope, "--confdir="+dir, "--dbdir="+dir, "--logdir="+dir, "--modulesdir=/usr/lib/anope", "--nofork")
	}
	if err != nil {
		n.Close()
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); !n.linked(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			defer n.Close()
			return nil, fmt.Errorf("the services did not link within 30s:\n%s", n.Log())
		}
	}
	return n, nil
}

// run starts a server program in the network's directory, as nobody
// when the tests run as root (neither server runs as root).
func (n *Network) run(bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.Dir = n.dir
	out, err := os.Create(filepath.Join(n.dir, filepath.Base(bin)+".out"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if os.Geteuid() == 0 {
		filepath.Walk(n.dir, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, 65534, 65534) })
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	n.procs = append(n.procs, cmd)
	return nil
}

// linked reports whether the server offers SASL, which it does once
// the services are linked.
func (n *Network) linked() bool {
	c, err := net.DialTimeout("tcp", n.Plain, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(c, "CAP LS 302\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.Contains(line, "sasl")
}

// Close stops the servers and removes their files.
func (n *Network) Close() {
	for _, p := range n.procs {
		p.Process.Kill()
		p.Wait()
	}
	os.RemoveAll(n.dir)
}

// Log is what the servers wrote (their output, the server's log).
func (n *Network) Log() string {
	var b []byte
	for _, f := range []string{"inspircd.out", "anope.out", "ircd.log", "services.log"} {
		raw, _ := os.ReadFile(filepath.Join(n.dir, f)) // a missing one adds nothing
		b = append(b, raw...)
	}
	return string(b)
}

// Account registers the services account name with password, once
// (later calls do nothing): a client with that nick registers it with
// NickServ and leaves.
func (n *Network) Account(t testing.TB, name, password string) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.made[name] {
		return
	}
	p := n.Connect(t, name, "", "")
	p.Say(t, "NickServ", "REGISTER "+password+" "+name+"@loadout.test")
	bridgetest.WaitFor(t, name+" registered", &p.Heard.Signal, func() bool {
		return strings.Contains(strings.Join(p.Notices("NickServ"), "\n"), "registered")
	})
	p.Quit()
	n.made[name] = true
}

// inspircdConf is the server's configuration: a plain and a TLS client
// port, a server port for the services, no flood or clone limits (every
// test client comes from 127.0.0.1), no DNS, rfc1459 casemapping, and
// the IRCv3 modules the bot asks for.
func inspircdConf(dir string, ports []int) string {
	conf := fmt.Sprintf(`<server name="irc.loadout.test" description="loadout tests" network="LoadoutTest">
<admin name="test" nick="test" email="test@loadout.test">
<sslprofile name="Clients" provider="gnutls" certfile="%[1]s/cert.pem" keyfile="%[1]s/key.pem" hash="sha256" requestclientcert="no">
<bind address="127.0.0.1" port="%[2]d" type="clients"> <bind address="127.0.0.1" port="%[3]d" type="clients" sslprofile="Clients">
<bind address="127.0.0.1" port="%[4]d" type="servers">
<connect name="main" allow="*" maxchans="50" timeout="60" pingfreq="2m" hardsendq="4M" softsendq="1M" recvq="64K" threshold="1000" commandrate="100000000" fakelag="no" localmax="1000" globalmax="1000" maxconnwarn="no" resolvehostnames="no" useident="no" limit="5000">
<cidr ipv4clone="32" ipv6clone="128"> <dns server="127.0.0.1" timeout="1"> <files motd="%[1]s/motd">
<options casemapping="rfc1459" defaultmodes="nt" syntaxhints="no"> <performance clonesonconnect="no" quietbursts="yes">
<log method="file" type="* -USERINPUT -USEROUTPUT" level="default" target="%[1]s/ircd.log">
<sasl target="services.loadout.test"> <uline server="services.loadout.test" silent="yes">
<link name="services.loadout.test" ipaddr="127.0.0.1" port="%[4]d" allowmask="127.0.0.0/8" sendpass="linkpass" recvpass="linkpass">
`, dir, ports[0], ports[1], ports[2])
	for _, m := range strings.Fields("ssl_gnutls cap ircv3 ircv3_accounttag ircv3_capnotify ircv3_ctctags ircv3_msgid sasl services_account hidechans spanningtree") {
		conf += `<module name="` + m + `">` + "\n"
	}
	return conf
}

// anopeConf is the services' configuration: NickServ alone (REGISTER
// at once, without mail; IDENTIFY), SASL, and no OperServ, so no
// limit on sessions from one host.
func anopeConf(dir string, port int) string {
	blocks := []string{
		`define { name = "services.host"; value = "services.loadout.test" }`,
		fmt.Sprintf(`uplink { host = "127.0.0.1"; ipv6 = no; ssl = no; port = %d; password = "linkpass" }`, port),
		fmt.Sprintf(`serverinfo { name = "services.loadout.test"; description = "Services"; pid = "%[1]s/anope.pid"; motd = "%[1]s/motd" }`, dir),
		`module { name = "inspircd3"; use_server_side_mlock = yes; use_server_side_topiclock = yes }`,
		`networkinfo { networkname = "LoadoutTest"; nicklen = 30; userlen = 10; hostlen = 64; chanlen = 64; modelistsize = 100; vhost_chars = "abcdefghijklmnopqrstuvwxyz0123456789.-"; allow_undotted_vhosts = false; disallow_start_or_end = ".-" }`,
		`options { seed = 7395218460; casemap = "rfc1459"; strictpasswords = no; badpasslimit = 0; updatetimeout = 5m; expiretimeout = 30m; readtimeout = 5s; warningtimeout = 4h; timeoutcheck = 3s; retrywait = 1s; hideprivilegedcommands = yes; hideregisteredcommands = yes }`,
		`mail { usemail = no }`,
		`module { name = "db_flatfile"; database = "anope.db"; keepbackups = 0; fork = no }`,
		`module { name = "enc_sha256" }`,
		`service { nick = "NickServ"; user = "services"; host = "services.host"; gecos = "Nickname Registration Service" }`,
		`module { name = "nickserv"; client = "NickServ"; forceemail = no; confirmemailchanges = no; defaults = "ns_private hide_email hide_mask"; regdelay = 0; expire = 0; kill = 60s; killquick = 20s; enforceruser = "enforcer"; enforcerhost = "services.host"; releasetimeout = 1m; guestnickprefix = "Guest"; nonicknameownership = no }`,
		`module { name = "ns_register"; registration = "none" }`,
		`command { service = "NickServ"; name = "REGISTER"; command = "nickserv/register" }`,
		`module { name = "ns_identify" }`,
		`command { service = "NickServ"; name = "IDENTIFY"; command = "nickserv/identify" }`,
		`module { name = "m_sasl" }`,
	}
	// Anope reads one key = value a line.
	return strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(strings.Join(blocks, "\n"), "; ", "\n\t"), "{ ", "{\n\t"), " }", "\n}") + "\n"
}
