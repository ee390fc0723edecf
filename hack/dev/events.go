package dev

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// startEventPrinter is the demo watch's sink: a CloudEvents receiver (the
// SDK's own) on l that prints each event it gets to w, as a pipeline's
// first step would see it.
func startEventPrinter(ctx context.Context, l net.Listener, w io.Writer) error {
	p, err := cehttp.New(cehttp.WithListener(l))
	if err != nil {
		return err
	}
	c, err := cloudevents.NewClient(p)
	if err != nil {
		return err
	}
	go func() {
		_ = c.StartReceiver(ctx, func(e cloudevents.Event) {
			// A file's event says its size; a transfer's, how it ended;
			// an expectation's, its window and the files it counted.
			var data struct {
				Size    *int64 `json:"size"`
				Message string `json:"message"`
				Window  *struct {
					Opens, Deadline time.Time
				} `json:"window"`
				FileCount int `json:"fileCount"`
			}
			_ = json.Unmarshal(e.Data(), &data)
			what := data.Message
			switch {
			case data.Size != nil:
				what = fmt.Sprintf("%d bytes", *data.Size)
			case data.Window != nil:
				what = fmt.Sprintf("the window %s to %s, %d files", data.Window.Opens.Local().Format(time.TimeOnly),
					data.Window.Deadline.Local().Format(time.TimeOnly), data.FileCount)
			}
			fmt.Fprintf(w, "[%s] event %s %s (%s), id %s\n", time.Now().Format(time.TimeOnly), e.Type(), e.Subject(), what, e.ID())
		})
	}()
	return nil
}
