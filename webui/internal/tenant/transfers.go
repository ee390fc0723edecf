package tenant

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// transferView is a transfer as the account's transfers page shows it.
type transferView struct {
	Name, From, To, Mode string
	// State is "testing" (under way), "ready" or "failed".
	State, Headline, Message string
	Progress                 string
	// Percent is the share of bytes done, for the progress bar.
	Percent  int64
	Failures []v1alpha1.TransferFailure
	Started  time.Time
}

// transferHeadlines say in words what a transfer's Ready reason means.
var transferHeadlines = map[string]string{
	v1alpha1.ReasonQueued:             "Waiting for this account's other transfers",
	v1alpha1.ReasonOverQuota:          "Waiting for other accounts' transfers",
	v1alpha1.ReasonTransferring:       "Copying…",
	v1alpha1.ReasonRetrying:           "Trying some files again…",
	v1alpha1.ReasonSucceeded:          "Done",
	v1alpha1.ReasonConnectionNotReady: "A connection is not ready",
	v1alpha1.ReasonSourceNotFound:     "Not found on the source server",
	v1alpha1.ReasonPermissionDenied:   "A server refused access",
	v1alpha1.ReasonDestinationFull:    "The destination server is full",
	v1alpha1.ReasonVerificationFailed: "Copies did not match their source",
	v1alpha1.ReasonFilesFailed:        "Some files failed",
	v1alpha1.ReasonTooManyFiles:       "Too many files",
	v1alpha1.ReasonInvalidSpec:        "The settings cannot work",
	v1alpha1.ReasonSecretNotFound:     "An OpenPGP key is missing or cannot be used",
	v1alpha1.ReasonKeyNotFound:        "No key decrypts it, or a key cannot be used",
	v1alpha1.ReasonSignatureInvalid:   "The signature is missing or wrong",
	v1alpha1.ReasonMessageCorrupt:     "The encrypted file is damaged",
}

// transferTTL is how long the UI's transfers are kept once they finished.
const transferTTL = 7 * 24 * 3600

// ListTransfers answers GET /transfers.
func (u *Pages) ListTransfers(w http.ResponseWriter, r *http.Request) error {
	var list v1alpha1.TransferList
	if err := u.Client.List(r.Context(), &list, client.InNamespace(web.AccountFrom(r.Context()).Namespace)); err != nil {
		return err
	}
	slices.SortFunc(list.Items, func(a, b v1alpha1.Transfer) int { return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) })
	views := make([]transferView, 0, len(list.Items))
	for _, t := range list.Items {
		src := t.Spec.Source
		v := transferView{Name: t.Name, From: src.ConnectionRef.String() + ":" + src.What(),
			To: t.Spec.Destination.ConnectionRef.String() + ":" + t.Spec.Destination.Path, Mode: strings.ToLower(string(t.Spec.Mode)),
			State: "testing", Headline: "Waiting for the worker…", Progress: t.Status.Progress, Failures: t.Status.Failures,
			Started: t.CreationTimestamp.Time}
		if b := t.Status.Bytes; b.Total > 0 {
			v.Percent = b.Done * 100 / b.Total
		} else if t.Finished() {
			v.Percent = 100
		}
		if ready := meta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionReady); ready != nil {
			v.Headline, v.Message = transferHeadlines[ready.Reason], ready.Message
			switch {
			case ready.Status == metav1.ConditionTrue:
				v.State = "ready"
			case meta.IsStatusConditionTrue(t.Status.Conditions, v1alpha1.ConditionStalled):
				v.State = "failed"
			}
		}
		views = append(views, v)
	}
	u.Render(w, r, http.StatusOK, "transfers", web.Page{Title: "Transfers", Data: views, Refresh: slices.ContainsFunc(views, func(v transferView) bool {
		return v.State == "testing"
	})})
	return nil
}

// transferFormData is the data of the new-transfer form: the connections
// to copy between.
type transferFormData struct {
	Connections []string
}

// NewTransferForm answers GET /transfers/new.
func (u *Pages) NewTransferForm(w http.ResponseWriter, r *http.Request) error {
	return u.transferForm(map[string]string{"from": r.URL.Query().Get("from"), "path": "/", "folder": "/", "mode": "Copy", "overwrite": "Never"})(w, r, http.StatusOK, web.Problems{})
}

// transferForm draws the new-transfer form, filled with values.
func (u *Pages) transferForm(values map[string]string) web.DrawForm {
	return func(w http.ResponseWriter, r *http.Request, status int, problem web.Problems) error {
		var list v1alpha1.SftpConnectionList
		if err := u.Client.List(r.Context(), &list, client.InNamespace(web.AccountFrom(r.Context()).Namespace)); err != nil {
			return err
		}
		names := make([]string, 0, len(list.Items))
		for _, c := range list.Items {
			names = append(names, c.Name)
		}
		slices.Sort(names)
		u.Render(w, r, status, "transfer_form", web.Page{Title: "Copy files between connections", Form: values, Error: problem.Form, Errors: problem.Fields, Data: transferFormData{Connections: names}})
		return nil
	}
}

// CreateTransfer starts a Transfer between two of the account's
// connections, as the form says.
func (u *Pages) CreateTransfer(w http.ResponseWriter, r *http.Request) error {
	values := map[string]string{}
	for _, field := range []string{"from", "path", "to", "folder", "mode", "overwrite", "sha256", "recursive"} {
		values[field] = strings.TrimSpace(r.PostFormValue(field))
	}
	ns := web.AccountFrom(r.Context()).Namespace
	t, err := readTransferForm(ns, values)
	if err == nil {
		err = u.ownConnections(r, ns, values["from"], values["to"])
	}
	if err == nil {
		err = u.createNoted(r, "Transfer", t)
	}
	if err != nil {
		return web.OnForm(err, u.transferForm(values))
	}
	http.Redirect(w, r, "/transfers", http.StatusSeeOther)
	return nil
}

// ownConnections checks that the account has the connections named.
func (u *Pages) ownConnections(r *http.Request, ns string, names ...string) error {
	for _, name := range names {
		var c v1alpha1.SftpConnection
		err := u.Client.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, &c)
		switch {
		case apierrors.IsNotFound(err):
			return &web.PersonError{Msg: fmt.Sprintf("This team has no connection %q.", name)}
		case err != nil:
			return err
		}
	}
	return nil
}

// cleanPath says whether p is absolute with no . or .. parts.
func cleanPath(p string) bool {
	return strings.HasPrefix(p, "/") && !slices.ContainsFunc(strings.Split(p, "/"), func(s string) bool { return s == "." || s == ".." })
}

// readTransferForm checks the form's values and makes the Transfer they
// describe, saying in the form's words what the CRD would refuse.
func readTransferForm(ns string, values map[string]string) (*v1alpha1.Transfer, error) {
	mistakes := web.FieldErrors{}
	for field, which := range map[string]string{"from": "copy from", "to": "copy to"} {
		if values[field] == "" {
			mistakes.Add(field, "Choose the connection to "+which+".")
		}
	}
	for field, what := range map[string]string{"path": "file or folder to copy", "folder": "folder to copy into"} {
		if !cleanPath(values[field]) {
			mistakes.Add(field, fmt.Sprintf("%q is not a %s: start it with / (such as /outgoing), with no . or .. parts.", values[field], what))
		}
	}
	mode, overwrite := v1alpha1.TransferMode(values["mode"]), v1alpha1.OverwritePolicy(values["overwrite"])
	if mode != v1alpha1.TransferCopy && mode != v1alpha1.TransferMove {
		mistakes.Add("mode", "Choose whether to copy or to move the files.")
	}
	if overwrite != v1alpha1.OverwriteNever && overwrite != v1alpha1.OverwriteIfDifferent && overwrite != v1alpha1.OverwriteAlways {
		mistakes.Add("overwrite", "Choose what becomes of a file already there.")
	}
	if values["from"] == values["to"] && values["path"] == values["folder"] {
		mistakes.Add("folder", "The files would be copied onto themselves: choose another folder to copy into.")
	}
	if err := mistakes.Err(); err != nil {
		return nil, err
	}
	t := &v1alpha1.Transfer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: values["from"] + "-to-" + values["to"] + "-"},
		Spec: v1alpha1.TransferSpec{
			Source: v1alpha1.TransferSource{ConnectionRef: v1alpha1.ConnectionReference{Name: values["from"]}, Path: values["path"],
				Recursive: values["recursive"] != ""},
			TransferOptions: v1alpha1.TransferOptions{
				Destination: v1alpha1.TransferDestination{ConnectionRef: v1alpha1.ConnectionReference{Name: values["to"]}, Path: values["folder"]},
				Mode:        mode, Overwrite: overwrite, Verify: v1alpha1.VerifySize,
				TTLSecondsAfterFinished: ptrTo(int32(transferTTL))}}}
	if values["sha256"] != "" {
		t.Spec.Verify = v1alpha1.VerifySHA256
	}
	if len(t.GenerateName) > 60 {
		t.GenerateName = "transfer-"
	}
	return t, nil
}

func ptrTo[T any](v T) *T { return &v }

// transferOf is the team's transfer the path names.
func (u *Pages) transferOf(r *http.Request) (*v1alpha1.Transfer, error) {
	var t v1alpha1.Transfer
	return &t, u.teamObject(r, &t)
}

// ConfirmDeleteTransfer answers GET /transfers/{name}/delete.
func (u *Pages) ConfirmDeleteTransfer(w http.ResponseWriter, r *http.Request) error {
	t, err := u.transferOf(r)
	if err != nil {
		return err
	}
	what := "the transfer of " + t.Spec.Source.What()
	if t.Finished() {
		return u.Confirm(w, r, web.Confirmation{Question: "Remove " + what + " from the list?",
			Consequence: "Only the record goes: the files it copied stay where they are.",
			Action:      r.URL.Path, Button: "Remove", Back: "/transfers"})
	}
	return u.Confirm(w, r, web.Confirmation{Question: "Stop " + what + "?",
		Consequence: "It stops now and is removed from the list. The files already copied stay.",
		Action:      r.URL.Path, Button: "Stop the transfer", Keep: "Let it run", Back: "/transfers"})
}

// DeleteTransfer deletes one of the account's transfers: one under way
// stops, leaving the files already copied.
func (u *Pages) DeleteTransfer(w http.ResponseWriter, r *http.Request) error {
	t, err := u.transferOf(r)
	if err != nil {
		return err
	}
	if err := client.IgnoreNotFound(u.Client.Delete(r.Context(), t, client.Preconditions{UID: &t.UID})); err != nil {
		return err
	}
	if t.Finished() {
		u.Notify(w, r, "The transfer of "+t.Spec.Source.What()+" is removed from the list.")
	} else {
		u.Notify(w, r, "The transfer of "+t.Spec.Source.What()+" is stopped.")
	}
	http.Redirect(w, r, "/transfers", http.StatusSeeOther)
	return nil
}
