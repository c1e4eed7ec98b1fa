package stack

import "testing"

func TestCheckLoopback(t *testing.T) {
	tests := []struct {
		addr     string
		insecure bool
		ok       bool
	}{
		{"127.0.0.1:7070", false, true},
		{"[::1]:7070", false, true},
		{"localhost:7070", false, true},
		{"0.0.0.0:7070", false, false},
		{":7070", false, false},
		{"10.0.0.5:7070", false, false},
		{"0.0.0.0:7070", true, true},
		{"nonsense", false, false},
	}
	for _, tt := range tests {
		err := checkLoopback("--http-addr", tt.addr, tt.insecure, "falcon dev")
		if (err == nil) != tt.ok {
			t.Errorf("checkLoopback(%q, %v) = %v, want ok=%v", tt.addr, tt.insecure, err, tt.ok)
		}
	}
}

func TestLockDirIsExclusive(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDir(dir); err == nil {
		t.Fatal("a second lock on the same data dir succeeded")
	}
	unlock()
	again, err := lockDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	again()
}
