package tenancy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testgpg"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
	"github.com/sftpgate/sftpgate/hack/fixtures/testwebui"
)

// TestOpenPGPInbox: in the browser, an account adds its private key and a
// partner's public key (shown by fingerprint only), and watches an inbox
// whose files are decrypted into another connection's folder, the
// partner's signature required, and the originals filed once done.
func TestOpenPGPInbox(t *testing.T) {
	t.Parallel()
	sshd := testsshd.Start(t)
	for _, dir := range []string{"inbox", "done", "failed"} {
		must(t, os.Mkdir(filepath.Join(sshd.Dir, dir), 0o755))
		must(t, os.Chown(filepath.Join(sshd.Dir, dir), sshd.UID, sshd.GID))
	}
	ours, partner := testgpg.Start(t, "ours", testgpg.Curve25519), testgpg.Start(t, "partner", testgpg.RSA)
	partner.Trust(t, ours)
	ctx := testwebui.Browser(t)
	testwebui.SignUp(t, ctx, uiURL)
	testwebui.AddConnection(t, ctx, uiURL, "partner", sshd, sshd.Password)
	testwebui.AddConnection(t, ctx, uiURL, "archive", sshd, sshd.Password)

	addKey := func(name string, key []byte, passphrase string) {
		t.Helper()
		must(t, chromedp.Do(ctx,
			chromedp.Navigate(uiURL+"/openpgp"),
			chromedp.SendKeys(chromedp.ID("name"), name),
			chromedp.SetValue(chromedp.ID("key"), string(key)),
			chromedp.SendKeys(chromedp.ID("passphrase"), passphrase),
			chromedp.Submit(chromedp.ID("name")),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-key="`+name+`"]`)),
		))
	}
	private, public := ours.Private(t), partner.Public(t, true)
	// A key that does not read is said so beside the field to change, in
	// words, and what was pasted stays, but a private key.
	for _, tc := range []struct{ key, passphrase, field, says, kept string }{
		{"not a key at all", "", "key", "This is not an OpenPGP key.", "not a key at all"},
		{string(private), "", "passphrase", "This private key is locked: enter its passphrase.", ""},
		{string(private), "not its passphrase", "passphrase", "This passphrase does not unlock the key.", ""},
	} {
		must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/openpgp"), chromedp.SendKeys(chromedp.ID("name"), "refused"),
			chromedp.SetValue(chromedp.ID("key"), tc.key), chromedp.SendKeys(chromedp.ID("passphrase"), tc.passphrase),
			chromedp.Submit(chromedp.ID("name")), chromedp.WaitVisible(chromedp.ID(tc.field+"-error"))))
		shown, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[document.getElementById("`+tc.field+`-error").textContent, document.getElementById("key").value]`))
		must(t, err)
		if !strings.HasPrefix(shown[0], tc.says) || strings.TrimSpace(shown[1]) != tc.kept {
			t.Errorf("%q with passphrase %q: beside %s %q, the key box holds %d bytes", tc.key[:min(len(tc.key), 20)], tc.passphrase, tc.field, shown[0], len(shown[1]))
		}
	}
	testwebui.CheckPage(t, ctx, "OpenPGP keys (refused)")
	addKey("our-key", private, testgpg.Passphrase)
	addKey("partner-key", public, "")
	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("main")))
	must(t, err)
	// A line of each key's body.
	privateLine, publicLine := strings.Split(string(private), "\n")[3], strings.Split(string(public), "\n")[3]
	if !strings.Contains(html, ours.Fingerprint) || !strings.Contains(html, partner.Fingerprint) ||
		strings.Contains(html, privateLine) || strings.Contains(html, publicLine) || strings.Contains(html, testgpg.Passphrase) {
		t.Errorf("the keys page does not show the fingerprints alone: %s", html)
	}
	testwebui.CheckPage(t, ctx, "OpenPGP keys")

	must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/connections/partner/watches/new"), chromedp.WaitVisible(chromedp.ID("to"))))
	testwebui.CheckPage(t, ctx, "new watch")
	must(t, chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("path"), "/inbox"),
		chromedp.SetValue(chromedp.ID("to"), "archive"),
		chromedp.SetValue(chromedp.ID("folder"), "/clear"),
		chromedp.SetValue(chromedp.ID("openpgp"), "decrypt"),
		chromedp.SetValue(chromedp.ID("key"), "our-key"),
		chromedp.SetValue(chromedp.ID("verify"), "partner-key"),
		chromedp.SetValue(chromedp.ID("done"), "/done"),
		chromedp.SetValue(chromedp.ID("failed"), "/failed"),
		chromedp.Submit(chromedp.ID("path")),
		chromedp.WaitVisible(chromedp.CSS("table.watches")),
	))
	var list v1alpha1.SftpWatchList
	must(t, k8s.List(context.Background(), &list))
	var watch *v1alpha1.SftpWatch
	for i := range list.Items {
		if w := &list.Items[i]; w.Spec.ConnectionRef.Name == "partner" && w.Spec.Path == "/inbox" && w.Spec.Transfer != nil {
			watch = w
		}
	}
	if watch == nil || watch.Spec.Sink != nil || watch.Spec.Transfer.Destination.ConnectionRef.Name != "archive" ||
		watch.Spec.Transfer.OpenPGP == nil || watch.Spec.AfterDelivery.MoveTo != "/done" {
		t.Fatalf("the form made %+v", watch)
	}
	// Shorter waits than the form's defaults, for the test's sake; a
	// patch, which the worker's status writes meanwhile do not conflict
	// with.
	before := watch.DeepCopy()
	watch.Spec.PollInterval, watch.Spec.Stability.MinAge = &metav1.Duration{Duration: 5 * time.Second}, &metav1.Duration{}
	must(t, k8s.Patch(context.Background(), watch, client.MergeFrom(before)))
	testkit.EventuallyFound(t, "the watch polls", func() (bool, string) {
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(watch), watch))
		return watch.Status.LastPollTime != nil && watch.Status.ObservedGeneration == watch.Generation, fmt.Sprintf("%+v", watch.Status)
	})

	statement := []byte("account,balance\n1,100.00\n")
	sealed := partner.EncryptSign(t, statement, []*testgpg.Home{ours})
	must(t, os.WriteFile(filepath.Join(sshd.Dir, "inbox", "statement.csv.pgp"), sealed, 0o644))
	testkit.EventuallyFound(t, "the file is decrypted and filed", func() (bool, string) {
		clear, _ := os.ReadFile(filepath.Join(sshd.Dir, "clear", "statement.csv"))
		_, filed := os.Stat(filepath.Join(sshd.Dir, "done", "statement.csv.pgp"))
		if bytes.Equal(clear, statement) && filed == nil {
			return true, ""
		}
		must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(watch), watch))
		return false, fmt.Sprintf("%q; the watch: %+v", clear, watch.Status)
	})
	// The connection's page says where the files go, and how many went.
	testkit.EventuallyFound(t, "the watch's row says where the files go, and that one went", func() (bool, string) {
		must(t, chromedp.Do(ctx, chromedp.Navigate(uiURL+"/connections/partner"), chromedp.WaitVisible(chromedp.CSS("table.watches"))))
		row, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("table.watches tbody tr")))
		must(t, err)
		return strings.Contains(row, "files to archive:/clear, decrypted") && strings.Contains(row, "1 transferred"), fmt.Sprintf("%q", row)
	})
	testwebui.CheckPage(t, ctx, "connection (watching an inbox)")
}
