package watches

import "testing"

// TestHeldFilesRefusePastEitherLimit: a watch grows only while the
// replica and its namespace stay within their limits; shrinking always
// succeeds and frees room for others.
func TestHeldFilesRefusePastEitherLimit(t *testing.T) {
	h := heldFiles{limit: 10, perNamespace: 6}
	var a, b, c int
	if !h.resize(&a, "ns1", 6) || h.resize(&b, "ns1", 1) {
		t.Fatal("a namespace grows past its share, or not up to it")
	}
	if !h.resize(&c, "ns2", 4) || h.resize(&b, "ns3", 1) {
		t.Fatal("the replica grows past its limit, or not up to it")
	}
	if b != 0 || h.n != 10 {
		t.Errorf("a refused watch counts %d; the replica %d", b, h.n)
	}
	if !h.resize(&a, "ns1", 2) || !h.resize(&b, "ns3", 4) {
		t.Error("room made by a shrinking watch is not given to another")
	}
	h.resize(&a, "ns1", 0)
	if _, ok := h.of["ns1"]; ok {
		t.Error("a namespace with nothing tracked is still counted")
	}
}
