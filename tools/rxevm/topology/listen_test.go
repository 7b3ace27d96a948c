package topology

import (
	"net"
	"testing"
)

func TestListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if ok, err := Listening(port); err != nil || !ok {
		t.Fatalf("port %d: listening %v, %v; want true", port, ok, err)
	}
	l.Close()
	if ok, err := Listening(port); err != nil || ok {
		t.Fatalf("closed port %d: listening %v, %v; want false", port, ok, err)
	}
}
