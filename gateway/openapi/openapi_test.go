package openapi

import (
	"strings"
	"testing"

	"github.com/sftpgate/sftpgate/gateway/commands"
)

func TestDocumentDescribesEveryCommand(t *testing.T) {
	doc := load(t, "/sftp/")
	if doc.OpenAPI != "3.1.0" || doc.Servers[0].URL != "/sftp" {
		t.Errorf("openapi %q, server %q", doc.OpenAPI, doc.Servers[0].URL)
	}
	for _, name := range commands.Names() {
		op := doc.Paths.Find("/{slug}/" + string(name))
		if op == nil || op.Post == nil || op.Post.OperationID != string(name) {
			t.Errorf("command %s is not described", name)
		}
	}
	// And the tus endpoint's two.
	if got, want := doc.Paths.Len(), len(commands.Names())+2; got != want {
		t.Errorf("%d paths for %d commands and uploads", got, want)
	}
	for _, p := range []string{"/{slug}/uploads", "/{slug}/uploads/{id}"} {
		if doc.Paths.Find(p) == nil {
			t.Errorf("%s is not described", p)
		}
	}
}

func TestDocsPage(t *testing.T) {
	page, err := Docs("/sftp")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"POST /sftp/{slug}/write", `href="/sftp/openapi.json"`, "createParents", "sftpStatus", "504", "PATCH /sftp/{slug}/uploads/{id}", "460"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page does not show %q", want)
		}
	}
}
