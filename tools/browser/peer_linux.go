//go:build linux

package browser

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// peerIsTree reports whether the TCP connection c, accepted on
// 127.0.0.1, was made by a process of the tree rooted at pid (the
// keeper, chromium and its children): the socket's inode is found in
// /proc/net/tcp by its two ends, then among the tree's open files. Each
// step is linear in what it reads.
func peerIsTree(c net.Conn, pid int) bool {
	if pid <= 0 {
		return false
	}
	local, ok1 := c.RemoteAddr().(*net.TCPAddr)
	remote, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return false
	}
	inode := socketInode(local.AddrPort(), remote.AddrPort())
	if inode == "" {
		return false
	}
	want := "socket:[" + inode + "]"
	for _, p := range tree(pid) {
		fds, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(p), "fd"))
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(p), "fd", fd.Name())); err == nil && l == want {
				return true
			}
		}
	}
	return false
}

// socketInode is the inode of the IPv4 TCP socket whose local end is
// local and remote end remote, "" when none is listed.
func socketInode(local, remote netip.AddrPort) string {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return ""
	}
	defer f.Close()
	l, r := procAddr(local), procAddr(remote)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 9 && fields[1] == l && fields[2] == r {
			return fields[9]
		}
	}
	return ""
}

// procAddr writes an IPv4 address and port as /proc/net/tcp does: the
// address's four bytes as a little-endian word, in hex, then the port.
func procAddr(ap netip.AddrPort) string {
	a := ap.Addr().Unmap().As4()
	word := binary.LittleEndian.Uint32(a[:])
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], word)
	return strings.ToUpper(hex.EncodeToString(b[:])) + ":" + fmt.Sprintf("%04X", ap.Port())
}

// tree is pid and its descendants, from /proc/<pid>/task/*/children.
func tree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out) && i < 4096; i++ {
		tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(out[i]), "task", "*", "children"))
		for _, t := range tasks {
			b, _ := os.ReadFile(t)
			for _, f := range bytes.Fields(b) {
				if n, err := strconv.Atoi(string(f)); err == nil {
					out = append(out, n)
				}
			}
		}
	}
	return out
}
