package dev

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	openpgp "github.com/ProtonMail/go-crypto/openpgp/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/pgp"
	"github.com/sftpgate/sftpgate/webui"
)

// The demo's OpenPGP names: its own key (which decrypts), the partner's
// (which signs what the partner sends), the inbox watch, and the file the
// tour drops.
const (
	demoKeySecret    = "demo-openpgp" //nolint:gosec // a Secret's name, not a credential
	partnerKeySecret = "partner-openpgp"
	inboxWatch       = "partner-inbox"
	tourMessage      = "payroll.csv.pgp"
)

// openPGPKeys are the demo's key pairs, armored, made once.
type openPGPKeys struct {
	DemoPrivate    string `json:"demoPrivate"`
	DemoPublic     string `json:"demoPublic"`
	PartnerPrivate string `json:"partnerPrivate"`
	PartnerPublic  string `json:"partnerPublic"`
	Passphrase     string `json:"passphrase"`
}

// newOpenPGPKeys makes the two key pairs (Ed25519 and Cv25519), the
// private ones locked by one passphrase.
func newOpenPGPKeys(passphrase string) (*openPGPKeys, error) {
	k := &openPGPKeys{Passphrase: passphrase}
	for _, who := range []struct {
		name, email     string
		private, public *string
	}{
		{"sftpgate demo", demoEmail, &k.DemoPrivate, &k.DemoPublic},
		{"Demo partner", "partner@sftpgate.dev", &k.PartnerPrivate, &k.PartnerPublic},
	} {
		config := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA}
		e, err := openpgp.NewEntity(who.name, "", who.email, config)
		if err != nil {
			return nil, err
		}
		var public bytes.Buffer
		if err := armored(&public, openpgp.PublicKeyType, e.Serialize); err != nil {
			return nil, err
		}
		if err := e.EncryptPrivateKeys([]byte(passphrase), config); err != nil {
			return nil, err
		}
		var private bytes.Buffer
		if err := armored(&private, openpgp.PrivateKeyType, func(w io.Writer) error { return e.SerializePrivateWithoutSigning(w, config) }); err != nil {
			return nil, err
		}
		*who.private, *who.public = private.String(), public.String()
	}
	return k, nil
}

func armored(out *bytes.Buffer, blockType string, write func(io.Writer) error) error {
	w, err := armor.Encode(out, blockType, nil)
	if err != nil {
		return err
	}
	if err := write(w); err != nil {
		return err
	}
	return w.Close()
}

// createInbox makes the demo's key Secrets and the watch of
// partner/inbox/ that decrypts each *.pgp into clear/, files the
// original in partner/done/ or partner/failed/, and has the Transfer's
// end printed.
func (st *state) createInbox(ctx context.Context, k8s client.Client, eventsURL string) error {
	// As the web UI's OpenPGP keys page keeps them, so that it lists them.
	for name, key := range map[string][2]string{
		demoKeySecret:    {st.OpenPGP.DemoPrivate, st.OpenPGP.Passphrase},
		partnerKeySecret: {st.OpenPGP.PartnerPublic, ""},
	} {
		want, err := webui.OpenPGPKeySecret(demoNamespace, name, []byte(key[0]), []byte(key[1]))
		if err != nil {
			return fmt.Errorf("the demo's key %s: %w", name, err)
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: name}}
		if _, err := controllerutil.CreateOrUpdate(ctx, k8s, s, func() error {
			s.Labels, s.Annotations, s.Data = want.Labels, want.Annotations, want.Data
			return nil
		}); err != nil {
			return err
		}
	}
	watch := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: demoNamespace, Name: inboxWatch}}
	_, err := controllerutil.CreateOrUpdate(ctx, k8s, watch, func() error {
		watch.Spec.ConnectionRef.Name, watch.Spec.Path = demoName, "/partner/inbox"
		watch.Spec.Include = []string{"*.pgp"}
		watch.Spec.PollInterval = &metav1.Duration{Duration: 5 * time.Second}
		watch.Spec.Stability.MinAge = &metav1.Duration{}
		watch.Spec.Transfer = &v1alpha1.TransferOptions{
			Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: demoName}, Path: "/clear"},
			OpenPGP: &v1alpha1.TransferOpenPGP{Decrypt: &v1alpha1.OpenPGPDecrypt{
				KeySecretRef: v1alpha1.OpenPGPKeyRef{Name: demoKeySecret},
				VerifyWith:   []v1alpha1.OpenPGPKeyRef{{Name: partnerKeySecret}}}},
			Retry: v1alpha1.TransferRetry{Limit: new(int32)},
			Sink:  &v1alpha1.Destination{URI: eventsURL},
		}
		watch.Spec.AfterDelivery = v1alpha1.AfterDelivery{Action: v1alpha1.AfterDeliveryMove, MoveTo: "/partner/done", FailedTo: "/partner/failed"}
		return nil
	})
	return err
}

// writeTourMessage writes, in the data directory, what the partner sends
// in the tour: a payroll file encrypted to the demo's key and signed by
// the partner's, as gpg --encrypt --sign would.
func (st *state) writeTourMessage(dir string) error {
	to, err := pgp.ReadKeys([]byte(st.OpenPGP.DemoPublic), nil, "the demo's key")
	if err != nil {
		return err
	}
	signer, err := pgp.ReadKeys([]byte(st.OpenPGP.PartnerPrivate), []byte(st.OpenPGP.Passphrase), "the partner's key")
	if err != nil {
		return err
	}
	var sealed bytes.Buffer
	w, err := pgp.Encrypt(&sealed, pgp.Encryption{To: to, Signer: signer, Name: "payroll.csv"})
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte("employee,net\n1001,3100.00\n1002,2875.50\n")); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, tourMessage), sealed.Bytes(), 0o600); err != nil {
		return err
	}
	// The public keys, for gpg users: gpg --import them to encrypt their own.
	if err := os.WriteFile(filepath.Join(dir, "demo-openpgp-public.asc"), []byte(st.OpenPGP.DemoPublic), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "partner-openpgp-private.asc"), []byte(st.OpenPGP.PartnerPrivate), 0o600)
}
