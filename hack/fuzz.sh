#!/usr/bin/env bash
# make fuzz: every fuzz test of the repository's packages (a func FuzzX(f
# *testing.F) in a _test.go file, found afresh on each run, so that a target
# added later runs with no edit here), one after another, each for FUZZTIME
# (default 30s). Prints each target's executions; fails if any target does.
# A crasher is written by go test to the package's testdata/fuzz/FuzzX/:
# fix the code and commit the input, which then runs with every go test.
#
# FUZZTIME: how long each target runs; FUZZPARALLEL: its worker processes
# (go test's default: one per CPU); FUZZMINIMIZETIME: how long each new
# input is made smaller (default 100x: go test's 60s per input leaves a
# target of slow inputs, such as a server's, little time to fuzz); FUZZ: a
# regular expression of the targets to run (package path/FuzzName), all
# when empty.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-30s}
minimize=${FUZZMINIMIZETIME:-100x}
parallel=()
if [[ -n ${FUZZPARALLEL:-} ]]; then
	parallel=(-parallel "$FUZZPARALLEL")
fi
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# Each package's import path and its test files, then the fuzz tests in them.
targets=()
while read -r pkg dir files; do
	for f in $files; do
		while read -r name; do
			targets+=("$pkg $name")
		done < <(sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\([A-Za-z_][A-Za-z0-9_]* \*testing\.F\).*/\1/p' "$dir/$f")
	done
done < <(go list -f '{{.ImportPath}} {{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}' ./...)

if [[ -n ${FUZZ:-} ]]; then
	kept=()
	for t in "${targets[@]}"; do
		if [[ ${t/ //} =~ $FUZZ ]]; then
			kept+=("$t")
		fi
	done
	targets=("${kept[@]}")
fi
if ((${#targets[@]} == 0)); then
	echo "no fuzz tests found" >&2
	exit 1
fi
echo "${#targets[@]} fuzz tests, $fuzztime each"

failed=()
summary=()
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	out="$log/$name.log"
	echo "--- $pkg $name"
	status=ok
	# -run '^$': the package's other tests do not run, and its TestMain
	# starts no fixtures (testkit.Fuzzing).
	if ! go test "$pkg" -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "${parallel[@]}" >"$out" 2>&1; then
		status=FAILED
		failed+=("$pkg $name")
		cat "$out"
	fi
	# go test -fuzz's last progress line says how many inputs ran.
	execs=$(grep -oE 'execs: [0-9]+' "$out" | tail -n1 | grep -oE '[0-9]+' || true)
	summary+=("$(printf '%-8s %12s  %s %s' "$status" "${execs:-?}" "$pkg" "$name")")
	echo "${summary[-1]}"
done

echo
printf '%-8s %12s  %s\n' result execs target
printf '%s\n' "${summary[@]}"
if ((${#failed[@]} > 0)); then
	echo "failed: ${failed[*]}" >&2
	exit 1
fi
