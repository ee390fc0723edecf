package statuspatch_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testkit"
	"github.com/sftpgate/sftpgate/internal/statuspatch"
)

var k8s client.Client

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Client(&k8s)))
}

// TestCutKeepsCharactersWhole: a message cut to fit ends in a whole
// character and the mark, within the limit.
func TestCutKeepsCharactersWhole(t *testing.T) {
	if got := statuspatch.Cut("short", 1024); got != "short" {
		t.Errorf("Cut of a short message = %q", got)
	}
	long := strings.Repeat("é", 600) // 1200 bytes
	got := statuspatch.Cut(long, 1024)
	if len(got) > 1024 || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("Cut gave %d bytes, valid %v: %q…", len(got), utf8.ValidString(got), got[len(got)-8:])
	}
}

// TestEventType: a Warning only for an object that is not ready and not
// on its way there.
func TestEventType(t *testing.T) {
	cond := func(kind string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: kind, Status: s, Reason: "R"}
	}
	for _, c := range []struct {
		name       string
		conditions []metav1.Condition
		want       string
	}{
		{"ready", []metav1.Condition{cond(v1alpha1.ConditionReady, metav1.ConditionTrue)}, corev1.EventTypeNormal},
		{"first look", []metav1.Condition{cond(v1alpha1.ConditionReady, metav1.ConditionUnknown)}, corev1.EventTypeNormal},
		{"on its way", []metav1.Condition{cond(v1alpha1.ConditionReady, metav1.ConditionFalse),
			cond(v1alpha1.ConditionReconciling, metav1.ConditionTrue)}, corev1.EventTypeNormal},
		{"failed", []metav1.Condition{cond(v1alpha1.ConditionReady, metav1.ConditionFalse)}, corev1.EventTypeWarning},
		{"stalled", []metav1.Condition{cond(v1alpha1.ConditionReady, metav1.ConditionFalse),
			cond(v1alpha1.ConditionStalled, metav1.ConditionTrue)}, corev1.EventTypeWarning},
	} {
		if got := statuspatch.EventType(c.conditions); got != c.want {
			t.Errorf("%s: EventType = %s, want %s", c.name, got, c.want)
		}
	}
}

// TestPatchEvents: a change of Ready to True or False, or of its reason,
// is an event; one to Unknown (on its way) or none is not.
func TestPatchEvents(t *testing.T) {
	ctx := context.Background()
	obj := &v1alpha1.SftpWatch{ObjectMeta: metav1.ObjectMeta{Namespace: testkit.Namespace(t, k8s, "statuspatch-"), Name: "w"},
		Spec: v1alpha1.SftpWatchSpec{ConnectionRef: v1alpha1.ConnectionReference{Name: "box"}, Path: "/in", Sink: &v1alpha1.Destination{URI: "http://sink.example/"}}}
	testkit.Must(t, k8s.Create(ctx, obj))
	c := k8s
	recorder := events.NewFakeRecorder(10)
	w := statuspatch.Writer{Client: c, Recorder: recorder, Action: "Watch"}
	for _, step := range []struct {
		status metav1.ConditionStatus
		reason string
		event  bool
	}{
		{metav1.ConditionUnknown, "FirstPoll", false},
		{metav1.ConditionTrue, "Watching", true},
		{metav1.ConditionTrue, "Watching", false},
		{metav1.ConditionUnknown, "FirstPoll", false},
		{metav1.ConditionFalse, "DeliveryFailing", true},
		{metav1.ConditionFalse, "SinkUnreachable", true},
	} {
		before := &v1alpha1.SftpWatch{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), before); err != nil {
			t.Fatal(err)
		}
		next := before.DeepCopy()
		meta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: step.status, Reason: step.reason, Message: "m"})
		next.Status.LastError = step.reason // a change even where Ready has none
		recorded, err := w.Patch(ctx, before, next)
		if err != nil {
			t.Fatal(err)
		}
		if recorded != step.event || len(recorder.Events) != 0 != step.event {
			t.Errorf("Ready %s %s: an event recorded %t, %d sent, want %t", step.status, step.reason, recorded, len(recorder.Events), step.event)
		}
		for len(recorder.Events) > 0 {
			<-recorder.Events
		}
	}
}
