package bench

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"

	"github.com/sftpgate/sftpgate/hack/fixtures/testcluster"
	"github.com/sftpgate/sftpgate/hack/fixtures/testhttp"
	"github.com/sftpgate/sftpgate/hack/fixtures/testsshd"
)

// abRounds is how many times each party moves the large file in an A/B
// run; the median counts.
const abRounds = 7

// abPhase compares this build's large uploads and downloads with those of
// another build of the gateway (SFTPGATE_BENCH_AB names its binary), both
// serving the rig's cluster and server, and with the direct client. They
// take turns in one run, in an order that changes every round, so that
// the machine's slow spells weigh on all three: what differs is the
// builds'.
func abPhase(t *testing.T, r *rig, httpClient *http.Client, other string) {
	addr := testhttp.FreeAddr(t)
	b := exec.Command(other, "gateway", "--kubeconfig="+r.kubeconfig, "--listen-address="+addr, "--metrics-address=0",
		"--denied-networks="+testcluster.LoopbackNetworks, "--rate-per-key=0")
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Process.Kill(); _ = b.Wait() })
	this := r.client(httpClient, "box", r.token)
	that := &gatewayClient{url: "http://" + addr + "/box/", token: r.token, http: httpClient}
	waitServed(t, this, that)

	sshClient, err := ssh.Dial("tcp", net.JoinHostPort(r.sshd.Host, strconv.Itoa(int(r.sshd.Port))), &ssh.ClientConfig{
		User: testsshd.User, Auth: []ssh.AuthMethod{ssh.Password(r.sshd.Password)}, HostKeyCallback: ssh.FixedHostKey(r.sshd.HostKey),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sshClient.Close() }()
	direct, err := sftp.NewClient(sshClient)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = direct.Close() }()

	uploads := []func() error{
		func() error {
			f, err := direct.OpenFile(r.sshd.Dir+"/ab-direct", os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
			if err != nil {
				return err
			}
			if _, err := f.ReadFromWithConcurrency(io.LimitReader(zeros{}, largeSize), 0); err != nil {
				return err
			}
			return f.Close()
		},
		func() error {
			return this.call("write?path=ab-this", "application/octet-stream", io.LimitReader(zeros{}, largeSize), largeSize)
		},
		func() error {
			return that.call("write?path=ab-that", "application/octet-stream", io.LimitReader(zeros{}, largeSize), largeSize)
		},
	}
	downloads := []func() error{
		func() error {
			f, err := direct.Open(r.sshd.Dir + "/ab-direct")
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			_, err = f.WriteTo(io.Discard)
			return err
		},
		func() error { return this.download("ab-this", largeSize) },
		func() error { return that.download("ab-that", largeSize) },
	}
	fmt.Printf("\n%-20s %12s %12s %12s %10s %10s\n", "", "direct", "this build", "other build", "this/dir", "other/dir")
	for _, phase := range []struct {
		name string
		ops  []func() error
	}{{"256 MiB upload", uploads}, {"256 MiB download", downloads}} {
		times := make([][]time.Duration, len(phase.ops))
		for round := range abRounds + 1 {
			for i := range phase.ops {
				k := (i + round) % len(phase.ops) // each party goes first in turn
				d := timed(phase.ops[k])
				if round > 0 { // the first round warms the page cache and the pools
					times[k] = append(times[k], d)
				}
			}
		}
		med := make([]float64, len(times))
		for i, ts := range times {
			slices.Sort(ts)
			med[i] = mbps(ts[len(ts)/2])
			fmt.Printf("%-20s", phase.name+" "+[]string{"direct", "this", "other"}[i])
			for _, d := range ts {
				fmt.Printf(" %6.0f", mbps(d))
			}
			fmt.Println(" MB/s")
		}
		fmt.Printf("%-20s %7.0f MB/s %7.0f MB/s %7.0f MB/s %10.2f %10.2f\n", phase.name+", medians", med[0], med[1], med[2], med[1]/med[0], med[2]/med[0])
	}
}
