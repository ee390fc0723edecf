package tenant

import (
	"cmp"
	"encoding/csv"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/audit"
	"github.com/sftpgate/sftpgate/webui/internal/gw"
	"github.com/sftpgate/sftpgate/webui/internal/share"
	"github.com/sftpgate/sftpgate/webui/internal/web"
)

// activityScanned bounds the records one Activity page or export reads,
// the newest first: what is stored of an account is bounded by the
// worker's --audit-recent-records and --audit-outbox-records, and this
// bounds one request's work whatever they are. activityShown is how many
// the page shows.
const (
	activityScanned = 10000
	activityShown   = 50
)

// activityFilter is what the Activity page's form asks for: records of
// a connection, of an actor, naming a path that contains Path, of a
// result; empty fields match every record.
type activityFilter struct {
	Connection, Actor, Path, Result string
}

func (f activityFilter) matches(r audit.Record) bool {
	return (f.Connection == "" || r.Connection == f.Connection) &&
		(f.Actor == "" || strings.Contains(r.Actor.Name, f.Actor) || r.Actor.Kind+"/"+r.Actor.Name == f.Actor) &&
		(f.Path == "" || slices.ContainsFunc(r.Paths, func(p string) bool { return strings.Contains(p, f.Path) })) &&
		(f.Result == "" || r.Result == f.Result || f.Result == "failed" && r.Result != audit.ResultOK)
}

// activity is the Activity page's data.
type activity struct {
	Filter activityFilter
	Rows   []trailRow
	// Older is the next page's number, when there are older rows;
	// Scanned: the page read as many records as it may.
	Older   int
	Scanned bool
	// Query is the filters, as a URL's query (already escaped).
	Query template.URL
}

// ShowActivity shows the account's recent records, newest first, as the
// filters ask; with format=csv or format=jsonl, it sends them all as a
// file instead.
func (u *Pages) ShowActivity(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := activityFilter{Connection: strings.TrimSpace(q.Get("connection")), Actor: strings.TrimSpace(q.Get("actor")),
		Path: strings.TrimSpace(q.Get("path")), Result: strings.TrimSpace(q.Get("result"))}
	records, scanned, err := u.recentRecords(r, f)
	if err != nil {
		return err
	}
	switch format := q.Get("format"); format {
	case "csv", "jsonl":
		return exportActivity(w, format, records)
	case "":
	default:
		return &web.PersonError{Msg: "the format is csv or jsonl"}
	}
	q.Del("format")
	uiKeys, err := u.uiKeys(r)
	if err != nil {
		return err
	}
	rows := trailRows(records, uiKeys)
	n, _ := strconv.Atoi(q.Get("page"))
	n = min(max(n, 0), len(rows)/activityShown)
	from := min(n*activityShown, len(rows))
	to := min(from+activityShown, len(rows))
	data := activity{Filter: f, Rows: rows[from:to], Scanned: scanned}
	if to < len(rows) {
		data.Older = n + 1
	}
	q.Del("page")
	data.Query = template.URL(q.Encode()) //nolint:gosec // url.Values.Encode escapes each value
	u.Render(w, r, http.StatusOK, "activity", web.Page{Title: "Activity", Data: data})
	return nil
}

// uiKeys are the ids of the team's keys the web UI itself calls the
// gateway with: the file browser's and the share links'.
func (u *Pages) uiKeys(r *http.Request) (map[string]bool, error) {
	var list v1alpha1.ApiKeyList
	if err := u.Client.List(r.Context(), &list, client.InNamespace(web.AccountFrom(r.Context()).Namespace)); err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, k := range list.Items {
		if k.Labels[gw.LabelFilesKey] != "" || k.Labels[share.LabelShareKey] != "" {
			ids[cmp.Or(k.Status.KeyID, k.Spec.Token.KeyID)] = true
		}
	}
	return ids, nil
}

// recentRecords are the account's stored records that match f, newest
// first, of the newest activityScanned; scanned says whether older ones
// were left unread.
func (u *Pages) recentRecords(r *http.Request, f activityFilter) ([]audit.Record, bool, error) {
	ns := web.AccountFrom(r.Context()).Namespace
	segments, err := u.Records.List(r.Context(), ns)
	if err != nil {
		return nil, false, err
	}
	var out []audit.Record
	read := 0
	for i := len(segments) - 1; i >= 0; i-- {
		if read >= activityScanned {
			return out, true, nil
		}
		records, _, err := u.Records.Read(r.Context(), segments[i]) // what is unreadable the worker records as dropped
		if apierrors.IsNotFound(err) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, false, err
		}
		read += len(records)
		for _, rec := range records {
			// The segment is the account's; the record must be too.
			if rec.Namespace == ns && f.matches(rec) {
				out = append(out, rec)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b audit.Record) int { return b.Time.Compare(a.Time) })
	return out, false, nil
}

// exportActivity sends records as a file: JSON Lines, each record as it
// was chained (what `sftpgate audit verify` checks), or CSV for people.
func exportActivity(w http.ResponseWriter, format string, records []audit.Record) error {
	name := "activity-" + time.Now().UTC().Format("20060102-150405") + "." + format
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	if format == "jsonl" {
		w.Header().Set("Content-Type", "application/jsonl; charset=utf-8")
		for _, r := range records {
			if _, err := w.Write([]byte(r.String() + "\n")); err != nil { //nolint:gosec // text/csv, its cells made safe (csvSafe)
				return nil // the browser went away
			}
		}
		return nil
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	c := csv.NewWriter(w)
	_ = c.Write([]string{"time", "action", "actor_kind", "actor", "client", "request_id", "connection", "object", "paths",
		"bytes", "sha256", "result", "replica", "seq", "hash"})
	for _, r := range records {
		row := []string{r.Time.Format(time.RFC3339Nano), r.Action, r.Actor.Kind, r.Actor.Name, r.Client, r.RequestID,
			r.Connection, r.Object, strings.Join(r.Paths, " → "), strconv.FormatInt(r.Bytes, 10), r.SHA256, r.Result,
			r.Replica, strconv.FormatUint(r.Seq, 10), r.Hash}
		// Every cell: a field a stranger chose may be in any of them.
		for i := range row {
			row[i] = csvSafe(row[i])
		}
		_ = c.Write(row)
	}
	c.Flush()
	return nil
}

// csvSafe keeps a cell a spreadsheet would read as a formula (a file
// named "=cmd|..." by a partner) a plain string.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
