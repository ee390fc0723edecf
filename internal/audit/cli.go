package audit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Run is "sftpgate audit verify [file...]": it reads records (JSON Lines;
// standard input without files), and prints for each chain whether it is
// whole, what is missing or changed, and whether it was closed; it fails
// unless every chain is whole.
func Run(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: sftpgate audit verify [file...]\n\nChecks audit records (JSON Lines; standard input without files): each record's hash,\nthe links between them, and which are missing.")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.Arg(0) != "verify" {
		fs.Usage()
		return errors.New("the only subcommand is verify")
	}
	var in []io.Reader
	for _, name := range fs.Args()[1:] {
		f, err := os.Open(name) //nolint:gosec // the file the user names
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		in = append(in, f)
	}
	if len(in) == 0 {
		in = append(in, os.Stdin)
	}
	return verify(os.Stdout, io.MultiReader(in...))
}

func verify(w io.Writer, r io.Reader) error {
	records, skipped, err := Read(r)
	if err != nil {
		return err
	}
	return WriteReport(w, records, skipped, false)
}

// WriteReport writes what Verify says of records, a chain a line, and fails
// unless every chain is whole (skipped: the lines read that were not
// records). With recent, records are the recent part of each chain (a
// stored trail, whose older records were delivered and removed): a chain
// is checked from its first record held on.
func WriteReport(w io.Writer, records []Record, skipped Unreadable, recent bool) error {
	whole := skipped.Lines == 0
	if !whole {
		fmt.Fprintf(w, "%d lines are not records (the first: line %d)\n", skipped.Lines, skipped.First)
	}
	for _, rep := range Verify(records) {
		var says []string
		if recent && rep.First > 1 {
			// What lies before the first record held, missing or said
			// dropped, is not this trail's to show.
			before := func(g Gap) bool { return g.To < rep.First }
			rep.Missing, rep.Dropped = slices.DeleteFunc(rep.Missing, before), slices.DeleteFunc(rep.Dropped, before)
			says = append(says, fmt.Sprintf("from %d (those before were removed)", rep.First))
		}
		for _, g := range rep.Missing {
			says = append(says, fmt.Sprintf("missing %s", span(g)))
		}
		if len(rep.Broken) > 0 {
			says = append(says, fmt.Sprintf("changed %v", rep.Broken))
		}
		if rep.Whole() {
			says = append(says, "whole")
		}
		for _, g := range rep.Dropped {
			says = append(says, fmt.Sprintf("dropped %s past sftpgate's bounds (a drop record says so)", span(g)))
		}
		if rep.Closed {
			says = append(says, "closed")
		} else {
			says = append(says, "not closed: its replica ended, or it goes on past these records")
		}
		whole = whole && rep.Whole()
		fmt.Fprintf(w, "%s %s: %d records, %d to %d: %s\n", rep.Namespace, rep.Replica, rep.Records, rep.First, rep.Last, strings.Join(says, "; "))
	}
	if !whole {
		return errors.New("the trail is not whole")
	}
	return nil
}

func span(g Gap) string {
	if g.From == g.To {
		return fmt.Sprint(g.From)
	}
	return fmt.Sprintf("%d to %d", g.From, g.To)
}
