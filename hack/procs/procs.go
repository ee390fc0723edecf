// Package procs finds the processes below a process, from /proc: what the
// tests check is gone once a server they started has stopped.
package procs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Descendants lists the processes below pid.
func Descendants(pid int) []int {
	parents := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, stat := range stats {
		b, err := os.ReadFile(stat) //nolint:gosec // a path under /proc
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may hold spaces, so split after it.
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		child, _ := strconv.Atoi(filepath.Base(filepath.Dir(stat)))
		if len(fields) > 1 {
			ppid, _ := strconv.Atoi(fields[1])
			parents[ppid] = append(parents[ppid], child)
		}
	}
	var out []int
	for queue := parents[pid]; len(queue) > 0; queue = queue[1:] {
		out = append(out, queue[0])
		queue = append(queue, parents[queue[0]]...)
	}
	return out
}

// Alive reports whether pid still runs (a zombie does not count).
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
