package auditstore

import (
	"bytes"
	"testing"

	"github.com/sftpgate/sftpgate/internal/audit"
)

// FuzzChain: a record of any bytes in every member a stranger reaches
// (a header, a form, a partner's file name), linked between two plain
// ones, stored as a segment and read back, reads back as it was linked,
// within its bound, and its chain verifies whole: no false alarm, no
// record that cannot be read.
func FuzzChain(f *testing.F) {
	f.Add("gateway.write", "k-1", "10.0.0.1", "reports", "ApiKey/ci", "req-1", "ok", "/in/a.csv", "/out/b.csv", "team-a", int64(61))
	f.Add("webui.login", "\x80\x81\x82", "\xff", "c\x00d", "\u2028", string(bytes.Repeat([]byte{0x80}, 4000)), "=HYPERLINK(\"x\")",
		"/in/caf\xe9.csv", "\"\\\n\t", "team-b", int64(-1))
	f.Fuzz(func(t *testing.T, action, actor, client, connection, object, requestID, result, path1, path2, namespace string, n int64) {
		chains := &audit.Chains{Replica: "gateway/fuzz/1"}
		plain := audit.Record{Action: "gateway.read", Actor: audit.Actor{Kind: audit.ActorKey, Name: "k"}, Namespace: namespace, Result: audit.ResultOK}
		linked := []audit.Record{
			chains.Link(plain),
			chains.Link(audit.Record{Action: action, Actor: audit.Actor{Kind: audit.ActorAccount, Name: actor}, Bytes: n, Client: client,
				Connection: connection, Namespace: namespace, Object: object, Paths: []string{path1, path2}, RequestID: requestID,
				Result: result, SHA256: path2}),
			chains.Link(plain),
		}
		data, err := encode(linked)
		if err != nil {
			t.Fatal(err)
		}
		read := decode(data)
		if len(read) != len(linked) {
			t.Fatalf("%d records read back of %d", len(read), len(linked))
		}
		for i, r := range read {
			if len(linked[i].Line()) > audit.MaxRecordBytes {
				t.Errorf("record %d takes %d bytes", i, len(linked[i].Line()))
			}
			if got, want := r.Line(), linked[i].Line(); !bytes.Equal(got, want) {
				t.Errorf("record %d read back as\n%s\nlinked as\n%s", i, got, want)
			}
		}
		reports := audit.Verify(read)
		if len(reports) != 1 || !reports[0].Whole() || reports[0].Records != 3 {
			t.Errorf("verified: %+v", reports)
		}
	})
}
