package expectations

import (
	"encoding/json"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/worker/ends"
	"github.com/sftpgate/sftpgate/worker/expect"
)

// Data is an outcome's event's data, as JSON.
type Data struct {
	// Expectation names the FileExpectation; Connection, Slug and Path
	// the folder (Slug: where the gateway serves the connection).
	Expectation string `json:"expectation"`
	Connection  string `json:"connection"`
	Slug        string `json:"slug,omitempty"`
	Path        string `json:"path"`
	Outcome     string `json:"outcome"`
	Window      Window `json:"window"`
	// Time is when the outcome happened by the rules; DecidedTime when
	// the worker decided it (later than Time by more than a poll
	// interval: decided late, the worker down or the folder unlisted).
	Time        time.Time `json:"time"`
	DecidedTime time.Time `json:"decidedTime"`
	// Files are the files counted, the first ten; FileCount how many.
	Files     []File `json:"files"`
	FileCount int    `json:"fileCount"`
}

// Window is a window's opening and deadline.
type Window struct {
	Opens    time.Time `json:"opens"`
	Deadline time.Time `json:"deadline"`
}

// File is a counted file: when it came, and went if it did.
type File struct {
	Name string     `json:"name"`
	Size int64      `json:"size"`
	Came time.Time  `json:"came"`
	Gone *time.Time `json:"gone,omitempty"`
}

// cloudEvent is a's event: its source names the expectation, its subject
// the folder.
func cloudEvent(e *v1alpha1.FileExpectation, conn *ends.End, a *announcement) (cloudevents.Event, error) {
	r := a.Result
	ev := cloudevents.NewEvent()
	ev.SetID(a.ID)
	ev.SetType(expect.EventTypePrefix + outcomeName(r.Outcome))
	ev.SetSource(fmt.Sprintf("/apis/%s/namespaces/%s/fileexpectations/%s", v1alpha1.GroupVersion, e.Namespace, e.Name))
	ev.SetSubject(e.Spec.Path)
	ev.SetTime(r.Time.Time)
	d := Data{Expectation: e.Name, Connection: conn.Ref.String(), Slug: conn.Slug(), Path: e.Spec.Path, Outcome: string(r.Outcome),
		Window: Window{Opens: r.Window.Opens.UTC(), Deadline: r.Window.Deadline.UTC()}, Time: r.Time.UTC(), DecidedTime: r.DecidedTime.UTC(),
		Files: []File{}, FileCount: int(r.FileCount)}
	for _, f := range r.Files {
		file := File{Name: f.Name, Size: f.Size, Came: f.Came.UTC()}
		if f.Gone != nil {
			gone := f.Gone.UTC()
			file.Gone = &gone
		}
		d.Files = append(d.Files, file)
	}
	data, err := json.Marshal(d)
	if err != nil {
		return ev, err
	}
	return ev, ev.SetData(cloudevents.ApplicationJSON, data)
}
