package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

// dropper is a partner's plain SFTP client: it drops files into the
// tenant's watched folders in place, as partners do, and files to send
// into its outbox (under a .part name, renamed once whole).
type dropper struct {
	tn *tenant

	mu sync.Mutex
	// dropped is each file written whole into a watched folder, by path
	// below the tenant's root, and its size.
	dropped map[string]int64
	// aborted is each file whose drop was cut off: it may exist, or have
	// existed, at any size.
	aborted map[string]bool
	// pgp is each encrypted file dropped whole, and whether its signature
	// is the partner's (it must decrypt) or not (it must fail).
	pgp map[string]pgpDrop
	// sent is each outbox file renamed whole, and its content.
	sent map[string][]byte
	n    int
}

type pgpDrop struct {
	clear []byte // what it decrypts to
	good  bool   // signed by the partner
}

func (d *dropper) run(ctx context.Context) {
	d.dropped, d.aborted, d.pgp, d.sent = map[string]int64{}, map[string]bool{}, map[string]pgpDrop{}, map[string][]byte{}
	rng := rand.New(rand.NewPCG(d.tn.r.seed, uint64(1000+d.tn.i)))
	var c *sftp.Client
	defer func() {
		if c != nil {
			_ = c.Close()
		}
	}()
	for tick := 0; ctx.Err() == nil; tick++ {
		pause(ctx, 2*time.Second)
		if c == nil {
			var err error
			if c, err = d.dial(); err != nil {
				continue // the server restarts: try again at the next tick
			}
		}
		var err error
		d.tn.r.gate.RLock()
		switch {
		case tick%4 == 1:
			err = d.dropPGP(c, rng)
		case tick%5 == 2:
			err = d.send(c, rng)
		default:
			err = d.drop(c, rng)
		}
		d.tn.r.gate.RUnlock()
		if err != nil {
			_ = c.Close()
			c = nil
		}
	}
}

func (d *dropper) dial() (*sftp.Client, error) {
	s := d.tn.r.near
	conn, err := ssh.Dial("tcp", net.JoinHostPort(s.Host, strconv.Itoa(int(s.Port))), &ssh.ClientConfig{
		User: "sftpgate-test", Auth: []ssh.AuthMethod{ssh.Password(s.Password)},
		HostKeyCallback: ssh.FixedHostKey(s.HostKey), Timeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	c, err := sftp.NewClient(conn)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return c, nil
}

// abs is p below the tenant's root, as the SFTP client names it.
func (d *dropper) abs(p string) string {
	return path.Join(d.tn.r.near.Dir, d.tn.root, p)
}

func (d *dropper) next(prefix, ext string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n++
	return fmt.Sprintf("%s%04d%s", prefix, d.n, ext)
}

// write puts content at p in place; a cut-off write is removed if it can
// be, and named aborted either way.
func (d *dropper) write(c *sftp.Client, p string, content []byte) error {
	f, err := c.Create(d.abs(p))
	if err == nil {
		_, err = f.Write(content)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		d.mu.Lock()
		d.aborted["/"+p] = true // as events name it
		d.mu.Unlock()
		_ = c.Remove(d.abs(p))
	}
	return err
}

// drop puts a plain file into the watched inbox.
func (d *dropper) drop(c *sftp.Client, rng *rand.Rand) error {
	p := path.Join(inbox, d.next("d", ".txt"))
	content := randomBytes(rng, 1+rng.IntN(64<<10))
	if err := d.write(c, p, content); err != nil {
		return err
	}
	d.mu.Lock()
	d.dropped["/"+p] = int64(len(content))
	d.mu.Unlock()
	return nil
}

// dropPGP puts an encrypted file into the watched encrypted inbox: one in
// four signed by a key the tenant does not trust.
func (d *dropper) dropPGP(c *sftp.Client, rng *rand.Rand) error {
	m := d.tn.r.messages[rng.IntN(len(d.tn.r.messages))]
	p := path.Join(pgpInbox, d.next("p", ".csv.pgp"))
	if err := d.write(c, p, m.cipher); err != nil {
		return err
	}
	d.mu.Lock()
	d.pgp["/"+p] = pgpDrop{clear: m.clear, good: m.good}
	d.mu.Unlock()
	return nil
}

// send puts a file into the outbox the schedules copy.
func (d *dropper) send(c *sftp.Client, rng *rand.Rand) error {
	name := d.next("o", ".dat")
	p := path.Join(outbox, name)
	content := randomBytes(rng, 1+rng.IntN(512<<10))
	if err := d.write(c, p+".part", content); err != nil {
		return err
	}
	if err := c.PosixRename(d.abs(p+".part"), d.abs(p)); err != nil {
		_ = c.Remove(d.abs(p + ".part"))
		return err
	}
	d.mu.Lock()
	d.sent[name] = content
	d.mu.Unlock()
	return nil
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
