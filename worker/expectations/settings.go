package expectations

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sftpgate/sftpgate/api/v1alpha1"
	"github.com/sftpgate/sftpgate/internal/calendar"
	"github.com/sftpgate/sftpgate/worker/deliver"
	"github.com/sftpgate/sftpgate/worker/expect"
	"github.com/sftpgate/sftpgate/worker/watch"
)

// settings are an expectation's spec, read and checked.
type settings struct {
	windows          *calendar.Windows
	rule             expect.Rule
	interval, settle time.Duration
	delivery         deliver.Settings
}

// calendarMissing is a calendarRef that names no HolidayCalendar (yet).
type calendarMissing struct{ name string }

func (e *calendarMissing) Error() string {
	return fmt.Sprintf("there is no HolidayCalendar %s in this namespace", e.name)
}

// The defaults of the spec, where the API server did not set them.
const (
	defaultInterval = time.Minute
	defaultSettle   = 10 * time.Second
)

func pollInterval(e *v1alpha1.FileExpectation) time.Duration {
	if p := e.Spec.PollInterval; p != nil && p.Duration > 0 {
		return p.Duration
	}
	return defaultInterval
}

// readSettings reads e's spec, its calendar (from the cache) and its
// signing Secret (from the API server), checking what the API server's
// validation could not.
func readSettings(ctx context.Context, cache, direct client.Reader, e *v1alpha1.FileExpectation) (settings, error) {
	s := settings{interval: pollInterval(e), settle: defaultSettle}
	if m := e.Spec.Stability.MinAge; m != nil {
		s.settle = max(m.Duration, 0)
	}
	sched := e.Spec.Schedule
	var skip []calendar.Date
	dates := sched.SkipDates
	if ref := sched.CalendarRef; ref != nil {
		var cal v1alpha1.HolidayCalendar
		err := cache.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: ref.Name}, &cal)
		switch {
		case apierrors.IsNotFound(err):
			return s, &calendarMissing{ref.Name}
		case err != nil:
			return s, err
		}
		dates = append(append([]string{}, dates...), cal.Spec.Dates...)
	}
	for _, d := range dates {
		date, err := calendar.ParseDate(d)
		if err != nil {
			return s, fmt.Errorf("the date to skip %q: %w", d, err)
		}
		skip = append(skip, date)
	}
	// Five fields: a window a minute at the most (a descriptor such as
	// @every 1s would open one a second).
	if strings.HasPrefix(strings.TrimSpace(sched.Opens), "@") || len(strings.Fields(sched.Opens)) != 5 {
		return s, fmt.Errorf("schedule.opens: %q is not five cron fields (minute, hour, day of month, month, day of week)", sched.Opens)
	}
	var err error
	if s.windows, err = calendar.NewWindows(sched.Opens, cmp.Or(sched.TimeZone, "UTC"), sched.Deadline.Duration, skip); err != nil {
		return s, fmt.Errorf("schedule: %w", err)
	}
	files := e.Spec.Files
	if err := (watch.Filter{Include: files.Include}).Check(); err != nil {
		return s, fmt.Errorf("files.include: %w", err)
	}
	s.rule = expect.Rule{Globs: files.Include, MinCount: int(files.MinCount)}
	if files.MinSize != nil {
		s.rule.MinSize = *files.MinSize
	}
	if files.MaxSize != nil {
		s.rule.MaxSize = *files.MaxSize
	}
	if p := e.Spec.PickUpWithin; p != nil {
		s.rule.PickUpWithin = p.Duration
	}
	if e.Spec.Sink != nil {
		if s.delivery, err = deliver.ReadSettings(ctx, direct, e.Namespace, e.Spec.Delivery, e.Spec.SigningSecretRef); err != nil {
			return s, err
		}
	}
	return s, nil
}
