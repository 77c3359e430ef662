package redistest

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a server and can lose a reply: the
// connection that sends a chosen request is closed when the server
// answers it, so the client never learns whether the command ran (it did).
type Proxy struct {
	// Addr is the address clients dial.
	Addr   string
	target Target
	l      net.Listener
	mu     sync.Mutex
	marker []byte // a request containing it loses its reply; nil when disarmed
	conns  map[net.Conn]bool
	cuts   atomic.Int64
	wg     sync.WaitGroup
}

// StartProxy starts a proxy to a standalone target, stopped when the test
// ends.
func StartProxy(t testing.TB, target Target) *Proxy {
	if target.Cluster {
		t.Fatal("StartProxy: a proxy cannot stand in for the nodes of a cluster")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: l.Addr().String(), target: target, l: l, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Target returns the proxied target, named "proxy", at the proxy's address.
func (p *Proxy) Target() Target {
	t := p.target
	t.Name, t.Addrs = "proxy", []string{p.Addr}
	return t
}

// LoseReplyTo makes the proxy close, instead of answering, the next
// connection whose request contains marker, once the server has answered.
func (p *Proxy) LoseReplyTo(marker string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marker = []byte(marker)
}

// Cuts returns how many replies the proxy has lost.
func (p *Proxy) Cuts() int64 { return p.cuts.Load() }

func (p *Proxy) close() {
	p.l.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target.Addrs[0])
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns[client], p.conns[server] = true, true
		p.mu.Unlock()
		var doomed atomic.Bool
		p.wg.Add(2)
		go func() { // client to server: find the marked request
			defer p.wg.Done()
			defer server.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := client.Read(buf)
				if n > 0 {
					p.mu.Lock()
					if p.marker != nil && bytes.Contains(buf[:n], p.marker) {
						p.marker = nil
						doomed.Store(true)
					}
					p.mu.Unlock()
					if _, err := server.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // server to client: lose the marked request's reply
			defer p.wg.Done()
			defer client.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := server.Read(buf)
				if n > 0 && doomed.Load() {
					p.cuts.Add(1)
					server.Close()
					return
				}
				if n > 0 {
					if _, err := client.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					if err != io.EOF {
						server.Close()
					}
					return
				}
			}
		}()
	}
}
