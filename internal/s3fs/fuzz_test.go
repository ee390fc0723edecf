package s3fs_test

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sftpgate/sftpgate/internal/files"
	"github.com/sftpgate/sftpgate/internal/s3fs"
)

// store is an object store on loopback that answers what a fuzz input
// says: a listing's status and XML, a HEAD's status and headers, a GET's
// body (with the HEAD's headers).
type store struct {
	mu                     sync.Mutex
	listStatus, headStatus int
	list, body             []byte
	head                   http.Header
}

func (s *store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	listStatus, headStatus, list, body, head := s.listStatus, s.headStatus, s.list, s.body, s.head
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/xml")
	switch {
	case r.URL.Query().Has("list-type"):
		w.WriteHeader(listStatus)
		_, _ = w.Write(list)
	case r.Method == http.MethodHead || r.Method == http.MethodGet:
		for k, v := range head {
			w.Header()[k] = v
		}
		if r.Method == http.MethodGet {
			w.Header().Del("Content-Length") // the body is what it is
		}
		w.WriteHeader(headStatus)
		if r.Method == http.MethodGet {
			_, _ = w.Write(body)
		}
	default:
		w.WriteHeader(http.StatusNotImplemented)
	}
}

var (
	fuzzStore     = &store{}
	fuzzStoreOnce sync.Once
	fuzzClient    *minio.Core
)

// statusOf maps any number to an HTTP status a server could send.
func statusOf(n uint16) int { return 200 + int(n)%400 }

const listXML = `<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bucket</Name><Prefix>p/d/</Prefix><KeyCount>3</KeyCount><MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter><IsTruncated>%s</IsTruncated>%s
<Contents><Key>p/d/</Key><LastModified>2024-01-02T03:04:05.000Z</LastModified><ETag>"e"</ETag><Size>0</Size><StorageClass>STANDARD</StorageClass></Contents>
<Contents><Key>p/d/%s</Key><LastModified>2024-01-02T03:04:05.000Z</LastModified><ETag>"d41d8cd98f00b204e9800998ecf8427e"</ETag><Size>%s</Size><StorageClass>STANDARD</StorageClass></Contents>
<CommonPrefixes><Prefix>p/d/%s/</Prefix></CommonPrefixes></ListBucketResult>`

// FuzzStore: whatever an object store answers a listing, a HEAD or a GET
// (its XML, status and headers), the backend returns a clean error (a
// *files.StatusError, or the end of a read) or a bounded result: names a
// directory can hold, a read no longer than the object's size; and it
// returns, never hangs.
func FuzzStore(f *testing.F) {
	head := "Content-Length: 5\nEtag: \"5d41402abc4b2a76b9719d911017c592\"\nLast-Modified: Tue, 02 Jan 2024 03:04:05 GMT\nX-Amz-Meta-Mtime: 1704164645.5\n"
	for _, c := range []struct{ truncated, token, key, size, prefix string }{
		{"false", "", "x", "5", "sub"}, {"true", "<NextContinuationToken>t</NextContinuationToken>", "x", "5", "sub"},
		{"true", "", "x", "5", "sub"}, {"false", "", "..", "-1", "."}, {"false", "", "a/../b", "99999999999999999999", ".."},
		{"true", "<NextContinuationToken>t</NextContinuationToken>", "x", "5", "sub"},
	} {
		list := strings.NewReplacer("%s", "\x00").Replace(listXML)
		for _, v := range []string{c.truncated, c.token, c.key, c.size, c.prefix} {
			list = strings.Replace(list, "\x00", v, 1)
		}
		f.Add(uint16(0), []byte(list), uint16(0), head, []byte("hello"))
	}
	f.Add(uint16(0), []byte(strings.Replace(listXML, "%s", "true", 1)), uint16(0), head, []byte("hello, and more than the five bytes said"))
	f.Add(uint16(204), []byte(`<Error><Code>NoSuchKey</Code><Message>gone</Message></Error>`), uint16(204), "", []byte(nil))
	f.Add(uint16(303), []byte(`<Error><Code>SlowDown</Code></Error>`), uint16(206), "Content-Length: -1\nEtag: \nLast-Modified: x\n", []byte("x"))
	f.Add(uint16(0), []byte(`<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t</NextContinuationToken></ListBucketResult>`), uint16(0), head, []byte("hello"))
	f.Fuzz(func(t *testing.T, listStatus uint16, list []byte, headStatus uint16, head string, body []byte) {
		fuzzStoreOnce.Do(func() {
			srv := httptest.NewUnstartedServer(fuzzStore)
			srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the headers it refuses to send
			srv.Start()
			u, _ := url.Parse(srv.URL)
			c, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4("key", "secret", ""), Region: "us-east-1",
				BucketLookup: minio.BucketLookupPath, MaxRetries: 1})
			if err != nil {
				t.Fatal(err)
			}
			fuzzClient = &minio.Core{Client: c}
		})
		header, err := textproto.NewReader(bufio.NewReader(strings.NewReader(head + "\n\n"))).ReadMIMEHeader()
		if err != nil {
			return // not what an HTTP server can send
		}
		fuzzStore.mu.Lock()
		fuzzStore.listStatus, fuzzStore.list, fuzzStore.headStatus, fuzzStore.head, fuzzStore.body =
			statusOf(listStatus), list, statusOf(headStatus), http.Header(header), body
		fuzzStore.mu.Unlock()
		// A short timeout: a request's, and how long a listing may go
		// without an entry.
		fsys := s3fs.New(s3fs.Config{Core: fuzzClient, Bucket: "bucket", Prefix: "p/", Timeout: 50 * time.Millisecond})
		defer func() { _ = fsys.Close() }()
		done := make(chan struct{})
		go func() {
			defer close(done)
			fuzzOps(t, fsys)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("the store's answers hang the backend")
		}
	})
}

// maxListed is where the fuzz test stops a listing: a store may list
// without end, as a huge bucket would, for the caller to bound.
const maxListed = 100

func fuzzOps(t *testing.T, fsys s3fs.FS) {
	listed := 0
	err := fsys.Each("/d", func(fi fs.FileInfo) error {
		if !files.EntryName(fi.Name()) {
			t.Errorf("listed %q, which no directory can hold", fi.Name())
		}
		if listed++; listed == maxListed {
			return files.Stop
		}
		return nil
	})
	clean(t, "Each", err)
	fi, err := fsys.Stat("/d/x")
	clean(t, "Stat", err)
	if err == nil && fi.Name() != "x" {
		t.Errorf("Stat of /d/x says %q", fi.Name())
	}
	f, err := fsys.Open("/d/x")
	clean(t, "Open", err)
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	fi, err = f.Stat()
	clean(t, "Stat of the file", err)
	if err != nil {
		return
	}
	var got counter
	_, err = f.WriteTo(&got)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		clean(t, "WriteTo", err)
	}
	if got > counter(max(fi.Size(), 0)) {
		t.Errorf("read %d bytes of an object of %d", got, fi.Size())
	}
	p := make([]byte, 16)
	n, err := f.ReadAt(p, 1)
	if !errors.Is(err, io.EOF) {
		clean(t, "ReadAt", err)
	}
	if int64(n) > max(fi.Size()-1, 0) {
		t.Errorf("read %d bytes at 1 of an object of %d", n, fi.Size())
	}
}

// clean fails t unless err is none or one the file layer's callers tell
// apart: a *files.StatusError.
func clean(t *testing.T, what string, err error) {
	t.Helper()
	if _, ok := files.Status(err); err != nil && !ok {
		t.Errorf("%s: %v (%T) is not a *files.StatusError", what, err, err)
	}
}

// counter counts what is written to it, keeping none of it.
type counter int64

func (c *counter) Write(p []byte) (int, error) {
	*c += counter(len(p))
	return len(p), nil
}
