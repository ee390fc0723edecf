// Package procs reads what /proc says of processes: those below a process
// (what the tests check is gone once a server they started has stopped),
// whether one still runs or is stopped, and its CPU time (for the
// benchmark).
package procs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// stat is the fields of /proc/<pid>/stat after the command name, from the
// state on: the name may hold spaces, so they are split after it.
func stat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])), nil
}

// Descendants lists the processes below pid.
func Descendants(pid int) []int {
	parents := map[int][]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		child, _ := strconv.Atoi(filepath.Base(dir))
		if fields, err := stat(child); err == nil && len(fields) > 1 {
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
	fields, err := stat(pid)
	return err == nil && len(fields) > 0 && fields[0] != "Z"
}

// Stopped reports whether pid is stopped by a signal, or gone.
func Stopped(pid int) bool {
	fields, err := stat(pid)
	return err != nil || len(fields) == 0 || fields[0] == "T" || fields[0] == "Z"
}

// CPUTime is the user and system CPU time pid has used.
func CPUTime(pid int) (time.Duration, error) {
	return ticks(pid, 11, 12)
}

// TreeCPUTime is the CPU time pid and all its descendants have used, the
// ones that ended included: each live process's own time, and that of the
// children it has reaped (which count theirs).
func TreeCPUTime(pid int) time.Duration {
	var total time.Duration
	for _, p := range append(Descendants(pid), pid) {
		cpu, _ := ticks(p, 11, 12, 13, 14) // utime, stime, cutime, cstime
		total += cpu
	}
	return total
}

// ticks sums fields of pid's stat, in clock ticks of 100 Hz.
func ticks(pid int, fields ...int) (time.Duration, error) {
	stat, err := stat(pid)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, f := range fields {
		n, _ := strconv.ParseInt(stat[f], 10, 64)
		sum += n
	}
	return time.Duration(sum) * time.Second / 100, nil
}
