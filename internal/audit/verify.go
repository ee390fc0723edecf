package audit

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
)

// Report is what Verify found of one chain: a replica's records of one
// namespace.
type Report struct {
	Replica, Namespace string
	// Records is how many were held; First and Last their least and
	// greatest Seq.
	Records     int
	First, Last uint64
	// Missing are the runs of Seq from 1 to Last not held.
	Missing []Gap
	// Broken are the Seqs of records changed: a hash that is not the
	// record's, a link that is not the hash of the record before, or two
	// records of one Seq that differ.
	Broken []uint64
	// Closed: the chain's last record closes it; without one, the replica
	// ended (or the chain goes on past what is held) and the records of its
	// last moments may be lost.
	Closed bool
	// Dropped are the runs of Seq not held that a drop record (of any
	// chain of the namespace) names: dropped past sftpgate's bounds, and
	// said so. Missing are the others.
	Dropped []Gap
}

// Gap is a run of Seq not held, From to To.
type Gap struct{ From, To uint64 }

// Whole reports whether nothing is missing (unsaid) or broken from the
// chain's first record (Seq 1) to its last.
func (r Report) Whole() bool { return len(r.Missing) == 0 && len(r.Broken) == 0 }

// Verify checks records, of any chains and in any order: each record's
// hash, each link, and which Seqs are missing.
func Verify(records []Record) []Report {
	type key struct{ replica, namespace string }
	chains := map[key][]Record{}
	said := map[key][]Gap{}
	for _, r := range records {
		k := key{r.Replica, r.Namespace}
		chains[k] = append(chains[k], r)
		if r.Action == ActionDropped {
			for _, s := range r.Lost {
				k := key{s.Replica, r.Namespace}
				said[k] = append(said[k], Gap{s.From, s.To})
			}
		}
	}
	reports := make([]Report, 0, len(chains))
	for k, rs := range chains {
		slices.SortStableFunc(rs, func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) })
		rep := Report{Replica: k.replica, Namespace: k.namespace, First: rs[0].Seq, Last: rs[len(rs)-1].Seq}
		broken := map[uint64]bool{}
		var prev *Record
		for i := range rs {
			r := &rs[i]
			if r.Sum() != r.Hash {
				broken[r.Seq] = true
			}
			switch {
			case prev != nil && prev.Seq == r.Seq:
				if prev.Hash != r.Hash {
					broken[r.Seq] = true // the same record, repeated, must be the same
				}
				continue
			case prev != nil && r.Seq == prev.Seq+1 && r.Prev != prev.Hash:
				broken[r.Seq] = true
			case prev != nil && r.Seq > prev.Seq+1:
				rep.Missing = append(rep.Missing, Gap{prev.Seq + 1, r.Seq - 1})
			case prev == nil && r.Seq == 1 && r.Prev != "":
				broken[r.Seq] = true
			}
			rep.Records++
			prev = r
		}
		if rep.First > 1 {
			rep.Missing = append([]Gap{{1, rep.First - 1}}, rep.Missing...)
		}
		rep.Missing, rep.Dropped = apart(rep.Missing, said[k])
		rep.Closed = prev.Action == ActionClosed
		for seq := range broken {
			rep.Broken = append(rep.Broken, seq)
		}
		slices.Sort(rep.Broken)
		reports = append(reports, rep)
	}
	slices.SortFunc(reports, func(a, b Report) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Replica, b.Replica))
	})
	return reports
}

// apart splits the gaps into those the drop records' spans cover and
// the rest.
func apart(gaps, covered []Gap) (missing, dropped []Gap) {
	slices.SortFunc(covered, func(a, b Gap) int { return cmp.Compare(a.From, b.From) })
	for _, g := range gaps {
		at := g.From
		for _, c := range covered {
			if c.To < at || c.From > g.To {
				continue
			}
			if c.From > at {
				missing = append(missing, Gap{at, c.From - 1})
			}
			dropped = append(dropped, Gap{max(at, c.From), min(g.To, c.To)})
			at = min(g.To, c.To) + 1
			if at > g.To {
				break
			}
		}
		if at <= g.To {
			missing = append(missing, Gap{at, g.To})
		}
	}
	return missing, dropped
}

// MaxLine is the longest line Read reads as a record: sftpgate makes
// none over MaxRecordBytes.
const MaxLine = 1 << 20

// Unreadable counts the lines Read skipped, First the first one's number.
type Unreadable struct{ Lines, First int }

// Read reads records as JSON Lines (a CloudEvent's data, an export, a
// stored segment): one record a line, blank lines skipped. A line that is
// not a record, or is over MaxLine, is skipped and counted, never the end
// of what follows; err is the reader's own failure, after the records read
// before it.
func Read(r io.Reader) (records []Record, skipped Unreadable, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for n := 1; ; n++ {
		var tooLong bool
		line, tooLong, err = readLine(br, line[:0])
		var rec Record
		switch {
		case len(line) == 0 && !tooLong:
		case tooLong || json.Unmarshal(line, &rec) != nil:
			if skipped.Lines == 0 {
				skipped.First = n
			}
			skipped.Lines++
		default:
			records = append(records, rec)
		}
		if errors.Is(err, io.EOF) {
			return records, skipped, nil
		}
		if err != nil {
			return records, skipped, err
		}
	}
}

// readLine reads a line into buf, without its newline; past MaxLine it
// reads on to the line's end keeping nothing, and says so.
func readLine(br *bufio.Reader, buf []byte) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong && len(buf)+len(chunk) > MaxLine+1 {
			tooLong, buf = true, buf[:0]
		}
		if !tooLong {
			buf = append(buf, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return bytes.TrimSuffix(buf, []byte{'\n'}), tooLong, err
		}
	}
}

// FromLog are the records of namespace ("" for all) in a component's log:
// its "msg":"audit" lines; other lines are skipped.
func FromLog(log string, namespace string) []Record {
	var out []Record
	for line := range strings.Lines(log) {
		var entry struct {
			Msg    string
			Record Record
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "audit" && (namespace == "" || entry.Record.Namespace == namespace) {
			out = append(out, entry.Record)
		}
	}
	return out
}
