package expectations

import (
	"os"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestAlertsReadTheMetrics: every metric the sample alerting rules read
// is one the collector gives.
func TestAlertsReadTheMetrics(t *testing.T) {
	rules, err := os.ReadFile("../../config/prometheus/expectations.yaml")
	if err != nil {
		t.Fatal(err)
	}
	given := map[string]bool{}
	descs := make(chan *prometheus.Desc, 10)
	collector{}.Describe(descs)
	close(descs)
	name := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range descs {
		given[name.FindStringSubmatch(d.String())[1]] = true
	}
	read := regexp.MustCompile(`sftpgate_[a-z_]+`).FindAllString(string(rules), -1)
	if len(read) == 0 {
		t.Fatal("the rules read no metric")
	}
	for _, m := range read {
		if !given[m] {
			t.Errorf("the rules read %s, which no collector gives", m)
		}
	}
}
