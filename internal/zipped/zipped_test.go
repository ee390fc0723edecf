package zipped

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"sync"
	"testing"
)

// TestZip: what is zipped unzips as it was, with writers and readers
// reused by goroutines at once, a reader reused after a blob that is not
// gzip; what another gzip writer wrote unzips too; past the limit is
// refused.
func TestZip(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			want := strings.Repeat("state of "+string(rune('a'+i)), 1000*i+1)
			for range 20 {
				b, err := Zip(func(w *bufio.Writer) error { _, err := w.WriteString(want); return err })
				if err != nil {
					t.Error(err)
					return
				}
				if err := Unzip([]byte("not gzip"), 1<<20, func([]byte) error { return nil }); err == nil {
					t.Error("garbage unzipped")
				}
				var got string
				if err := Unzip(b, 1<<20, func(raw []byte) error { got = string(raw); return nil }); err != nil || got != want {
					t.Errorf("%d bytes back of %d: %v", len(got), len(want), err)
				}
			}
		})
	}
	wg.Wait()
	var other bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&other, gzip.BestCompression)
	_, _ = io.WriteString(zw, "from the release before")
	_ = zw.Close()
	if err := Unzip(other.Bytes(), 100, func(raw []byte) error {
		if string(raw) != "from the release before" {
			t.Errorf("read %q", raw)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if err := Unzip(other.Bytes(), 10, func([]byte) error { t.Error("read past the limit"); return nil }); err == nil {
		t.Error("past the limit unzipped")
	}
}
