package ftpfs_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/ftpfs"
)

// hostile is an FTP server (plain, on loopback) that answers as its
// fields say: what a broken or hostile server may send, which the
// session must bound, refuse or survive.
type hostile struct {
	// listing is what LIST sends; endless sends without end.
	listing []byte
	endless bool
	// feat is FEAT's reply lines (each without its CRLF).
	feat []string
	// pasvHost is the address PASV names.
	pasvHost string
	// dataAt records where each data connection came from.
	dataAt chan string
	// dirs are the folders CWD goes into (nil: any).
	dirs map[string]bool
}

func (h *hostile) start(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go h.serve(c)
		}
	}()
	return l.Addr().String()
}

func (h *hostile) serve(c net.Conn) {
	defer func() { _ = c.Close() }()
	r := bufio.NewReader(c)
	say := func(format string, args ...any) { _, _ = fmt.Fprintf(c, format+"\r\n", args...) }
	say("220 hostile")
	var data net.Listener
	cwd := "/"
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch strings.ToUpper(cmd) {
		case "USER":
			say("331 password")
		case "PASS":
			say("230 in")
		case "FEAT":
			if h.feat == nil {
				say("211 no features")
				continue
			}
			_, _ = io.WriteString(c, "211-features\r\n")
			for _, f := range h.feat {
				_, _ = io.WriteString(c, f+"\r\n")
			}
			say("211 end")
		case "TYPE", "NOOP":
			say("200 ok")
		case "PWD":
			say(`257 "%s" is the current directory`, cwd)
		case "CWD":
			if h.dirs != nil && !h.dirs[arg] {
				say("550 no such folder")
				continue
			}
			cwd = arg
			say("250 ok")
		case "EPSV":
			say("500 no")
		case "PASV":
			data, err = net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return
			}
			port := data.Addr().(*net.TCPAddr).Port //nolint:forcetypeassert // a TCP listener's
			host := strings.ReplaceAll(h.pasvHost, ".", ",")
			say("227 Entering Passive Mode (%s,%d,%d)", host, port>>8, port&0xff)
		case "LIST":
			say("150 here")
			d, err := data.Accept()
			_ = data.Close()
			if err != nil {
				return
			}
			if h.dataAt != nil {
				h.dataAt <- d.RemoteAddr().String()
			}
			if h.endless {
				line := []byte("-rw-r--r-- 1 a a 1 Jan 1 2020 " + strings.Repeat("x", 200) + "\r\n")
				for {
					if _, err := d.Write(line); err != nil {
						break
					}
				}
			} else {
				_, _ = d.Write(h.listing)
			}
			_ = d.Close()
			say("226 done")
		case "QUIT":
			say("221 bye")
			return
		default:
			say("502 not here")
		}
	}
}

func dial(t testing.TB, addr string, maxListing int64) *ftpfs.FS {
	t.Helper()
	f, err := ftpfs.Dial(context.Background(), &ftpfs.Config{Addr: addr, TLS: ftpfs.None, User: "u", Password: "p",
		ConnectTimeout: 5 * time.Second, OperationTimeout: 5 * time.Second, MaxListing: maxListing})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// TestEndlessListing: a listing is read up to its bound, then refused.
func TestEndlessListing(t *testing.T) {
	h := &hostile{endless: true, pasvHost: "127.0.0.1"}
	f := dial(t, h.start(t), 1<<20)
	var tooLarge *files.TooLargeError
	if err := f.Each("/", func(fs.FileInfo) error { return nil }); !errors.As(err, &tooLarge) || !tooLarge.Bytes {
		t.Fatalf("an endless listing: %v", err)
	}
}

// TestEndlessReply: a reply past its bound ends the connection, not the
// process's memory.
func TestEndlessReply(t *testing.T) {
	feat := make([]string, 20000)
	for i := range feat {
		feat[i] = " X" + strings.Repeat("y", 100)
	}
	h := &hostile{feat: feat, pasvHost: "127.0.0.1"}
	_, err := ftpfs.Dial(context.Background(), &ftpfs.Config{Addr: h.start(t), TLS: ftpfs.None, User: "u", Password: "p",
		ConnectTimeout: 5 * time.Second, OperationTimeout: 5 * time.Second})
	if !errors.Is(err, ftpfs.ErrTooLarge) {
		t.Fatalf("a 2 MB FEAT reply: %v", err)
	}
}

// TestPassiveAddress: a data connection goes to the control connection's
// address, whatever host PASV names (no bounce to another host).
func TestPassiveAddress(t *testing.T) {
	h := &hostile{pasvHost: "10.9.8.7", dataAt: make(chan string, 1),
		listing: []byte("-rw-r--r-- 1 a a 3 Jan 1 2020 a.csv\r\n")}
	f := dial(t, h.start(t), 0)
	var names []string
	if err := f.Each("/", func(fi fs.FileInfo) error { names = append(names, fi.Name()); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != "a.csv" {
		t.Fatalf("listing: %q", names)
	}
	if from := <-h.dataAt; !strings.HasPrefix(from, "127.0.0.1:") {
		t.Fatalf("data connection from %s", from)
	}
}

// FuzzListing: whatever a server lists, Each neither fails on it nor
// gives a name that leads out of the directory.
func FuzzListing(f *testing.F) {
	f.Add([]byte("-rw-r--r-- 1 a a 3 Jan 1 2020 a.csv\r\ndrwxr-xr-x 2 a a 4096 Nov 29 06:21 sub\r\n"))
	f.Add([]byte("-rw-r--r-- 1 a a 3 Jan 1 2020 ../../etc/passwd\r\n-rw-r--r-- 1 a a 3 Jan 1 2020 a/b\r\n"))
	f.Add([]byte("lrwxrwxrwx 1 a a 3 Jan 1 2020 l -> /etc\r\n-rw-r--r-- 1 a a 99999999999999999999 Jan 1 2020 big\r\n"))
	f.Add([]byte("01-16-20  02:16PM       <DIR>          dos\r\n01-16-20  02:16PM                 123 file.txt\r\n"))
	f.Add([]byte("-rw-r--r-- 1 a a 3 Jan 1 2020 .\r\n-rw-r--r-- 1 a a 3 Jan 1 2020 \x00x\r\n"))
	f.Fuzz(func(t *testing.T, listing []byte) {
		h := &hostile{listing: listing, pasvHost: "127.0.0.1"}
		fsys := dial(t, h.start(t), 1<<20)
		err := fsys.Each("/", func(fi fs.FileInfo) error {
			if !files.EntryName(fi.Name()) {
				t.Fatalf("a name that leads elsewhere: %q", fi.Name())
			}
			return nil
		})
		if err != nil {
			t.Fatalf("listing %q: %v", listing, err)
		}
	})
}

// TestLinksResolved: a link a listing shows leads where it says, however
// many links in a row, and a loop of links is refused, not followed for
// ever.
func TestLinksResolved(t *testing.T) {
	h := &hostile{pasvHost: "127.0.0.1", dirs: map[string]bool{"/": true, "/etc": true}, listing: []byte(
		"lrwxrwxrwx 1 a a 4 Jan 1 2020 out -> /etc\r\n" +
			"lrwxrwxrwx 1 a a 4 Jan 1 2020 loop -> loop\r\n" +
			"-rw-r--r-- 1 a a 3 Jan 1 2020 a.csv\r\n")}
	f := dial(t, h.start(t), 0)
	if real, err := f.RealPath("/out"); err != nil || real != "/etc" {
		t.Fatalf("RealPath(/out) = %q, %v", real, err)
	}
	if real, err := f.RealPath("/a.csv"); err != nil || real != "/a.csv" {
		t.Fatalf("RealPath(/a.csv) = %q, %v", real, err)
	}
	if target, err := f.ReadLink("/out"); err != nil || target != "/etc" {
		t.Fatalf("ReadLink(/out) = %q, %v", target, err)
	}
	if fi, err := f.Lstat("/out"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("Lstat(/out): %v, %v", fi, err)
	}
	if _, err := f.RealPath("/loop"); err == nil {
		t.Fatal("a loop of links resolved")
	}
}
