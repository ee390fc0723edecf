package chaos

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/filemodel"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/internal/apitoken"
)

// Folders of each tenant's share links on the near server.
const (
	sharedDir = "shared"  // a Download link's folder
	dropDir   = "dropbox" // an Upload link's folder, a drop box
)

// sharer is a partner with no account, holding two of the tenant's share
// links, which the web UI serves: it lists the shared folder and
// downloads its files, and uploads files into the drop box resumably,
// spreading its requests over the web UI's replicas.
type sharer struct {
	tn *tenant
	// files are the shared folder's, by name; they never change.
	files map[string][]byte
	// links are the two links' URLs, one per web UI replica; drops
	// uploads into the drop box through them.
	downloads, listings []string
	drops               *filemodel.Client

	mu sync.Mutex
	// acknowledged is each upload the web UI said was whole, by name;
	// begun each one it did not (it may be there, whole, or not at all).
	acknowledged, begun map[string][]byte
	// read counts downloads whole, listed listings with every file; cut
	// requests a fault answered (5xx, or none); wrong what no fault
	// explains.
	read, listed, cut int
	wrong             []string
	n                 int
}

// newSharer shares the tenant's folder and drop box on near with links
// made as kubectl would, and waits until both web UIs serve them.
func (tn *tenant) newSharer(ctx context.Context) *sharer {
	r := tn.r
	t, k8s := r.t, r.sys.Client
	sh := &sharer{tn: tn, files: map[string][]byte{}, acknowledged: map[string][]byte{}, begun: map[string][]byte{}}
	for _, d := range []string{sharedDir, dropDir} {
		p := filepath.Join(r.near.Dir, tn.root, d)
		testkit.Must(t, os.MkdirAll(p, 0o755))
		testkit.Must(t, os.Chown(p, r.near.UID, r.near.GID))
	}
	for i, size := range []int{100, 40 << 10, 300 << 10} {
		name := fmt.Sprintf("report-%d.bin", i)
		sh.files[name] = make([]byte, size)
		_, _ = cryptorand.Read(sh.files[name])
		testkit.Must(t, os.WriteFile(filepath.Join(r.near.Dir, tn.root, sharedDir, name), sh.files[name], 0o644))
	}
	link := func(name string, spec v1alpha1.ShareLinkSpec) string {
		token := "sgs_" + base64.RawURLEncoding.EncodeToString([]byte(tn.ns+"/"+name)) + "_" + cryptorand.Text() + cryptorand.Text()
		spec.Connection, spec.TokenSHA256 = "near", apitoken.Hash(token)
		testkit.Must(t, k8s.Create(ctx, &v1alpha1.ShareLink{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: name}, Spec: spec}))
		return token
	}
	download := link("reports", v1alpha1.ShareLinkSpec{Path: "/" + sharedDir, Mode: v1alpha1.ShareDownload})
	dropbox := link("dropbox", v1alpha1.ShareLinkSpec{Path: "/" + dropDir, Mode: v1alpha1.ShareUpload,
		Upload: &v1alpha1.ShareUploadLimits{MaxFileBytes: ptr(int64(1 << 20))}})
	sh.drops = &filemodel.Client{ID: fmt.Sprintf("t%ds", tn.i), HTTP: &http.Client{Timeout: 2 * time.Minute}}
	for _, ui := range r.webuis {
		sh.listings = append(sh.listings, ui.URL+"/s/"+download)
		sh.downloads = append(sh.downloads, ui.URL+"/s/"+download+"?download=1&path=/")
		sh.drops.URLs = append(sh.drops.URLs, ui.URL+"/s/"+dropbox+"/")
	}
	// Each web UI, through each gateway (the Service's turns).
	testkit.EventuallyFound(t, "the web UIs serve the share link of "+tn.ns, func() (bool, string) {
		for range 2 {
			for _, u := range sh.downloads {
				if status, body := get(u+"report-0.bin", "*/*"); status != http.StatusOK || !bytes.Equal(body, sh.files["report-0.bin"]) {
					return false, fmt.Sprintf("%s: %d %.200s", u, status, body)
				}
			}
		}
		return true, ""
	})
	return sh
}

// run lists, downloads or uploads every second, until ctx ends.
func (sh *sharer) run(ctx context.Context) {
	rng := rand.New(rand.NewPCG(sh.tn.r.seed, uint64(2000+sh.tn.i)))
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range sh.files {
			if !yield(name) {
				return
			}
		}
	})
	for tick := 0; ctx.Err() == nil; tick++ {
		pause(ctx, time.Second)
		sh.tn.r.gate.RLock()
		ui := tick % len(sh.downloads)
		switch tick % 3 {
		case 0:
			name := names[rng.IntN(len(names))]
			status, body := get(sh.downloads[ui]+name, "*/*")
			sh.observe("download "+name, status, func() bool { return bytes.Equal(body, sh.files[name]) }, &sh.read)
		case 1:
			status, body := get(sh.listings[ui], "text/html")
			sh.observe("the listing", status, func() bool {
				return !slices.ContainsFunc(names, func(n string) bool { return !bytes.Contains(body, []byte(n)) })
			}, &sh.listed)
		default:
			sh.upload(rng)
		}
		sh.tn.r.gate.RUnlock()
	}
}

// observe counts an answer: whole (ok says so), cut off by a fault, or
// wrong.
func (sh *sharer) observe(what string, status int, ok func() bool, whole *int) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch {
	case status == http.StatusOK && ok():
		*whole++
	case status == 0 || status >= http.StatusInternalServerError:
		sh.cut++
	default:
		sh.wrong = append(sh.wrong, fmt.Sprintf("%s: %d, not what was shared", what, status))
	}
}

// upload sends a new file into the drop box, in two parts that resume
// after a failure.
func (sh *sharer) upload(rng *rand.Rand) {
	sh.mu.Lock()
	sh.n++
	name := fmt.Sprintf("drop-%d.bin", sh.n)
	sh.mu.Unlock()
	content := make([]byte, 1+rng.IntN(200<<10))
	_, _ = cryptorand.Read(content)
	done, out, raw := sh.drops.Upload(name, string(content))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if done {
		sh.acknowledged[name] = content
		return
	}
	sh.begun[name] = content
	last := out[len(out)-1].Status
	if last != 0 && last < http.StatusInternalServerError && last != http.StatusConflict && last != http.StatusLocked && !filemodel.EndedUnseen(out) {
		sh.wrong = append(sh.wrong, fmt.Sprintf("upload %s: %d %.200s", name, last, raw))
	} else {
		sh.cut++
	}
}

// get GETs u, accepting accept, and returns the status (0: no answer)
// and the body.
func get(u, accept string) (int, []byte) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Accept", accept)
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil
	}
	return resp.StatusCode, body
}

// checkShares: every download through a share link had the shared bytes
// and every listing its files; every upload the drop box acknowledged is
// there whole, one it did not is whole or absent, and nothing else is.
func (r *rig) checkShares() check {
	c := check{name: "share links: downloads and drop-box uploads whole"}
	var read, listed, acknowledged, cut int
	for _, tn := range r.tenants {
		sh := tn.shares
		read, listed, cut, acknowledged = read+sh.read, listed+sh.listed, cut+sh.cut, acknowledged+len(sh.acknowledged)
		for _, w := range sh.wrong {
			c.breach("%s: %s", tn.ns, w)
		}
		dir := filepath.Join(r.near.Dir, tn.root, dropDir)
		for name, content := range sh.acknowledged {
			if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, content) {
				c.breach("%s: %s acknowledged, holds %d of %d bytes (%v)", tn.ns, name, len(got), len(content), err)
			}
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			c.breach("%s: %v", tn.ns, err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue // a partial file: the temporaries' check
			}
			content, begun := sh.begun[e.Name()]
			if _, ok := sh.acknowledged[e.Name()]; ok {
				continue
			}
			if got, _ := os.ReadFile(filepath.Join(dir, e.Name())); !begun || !bytes.Equal(got, content) {
				c.breach("%s: %s in the drop box, not an upload's whole file", tn.ns, e.Name())
			}
		}
	}
	c.counts = fmt.Sprintf("%d downloads whole, %d listings, %d uploads acknowledged and there, %d cut off by faults", read, listed, acknowledged, cut)
	return c
}
