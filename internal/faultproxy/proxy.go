package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

var proxyCount atomic.Uint64

// Proxy is a TCP proxy between clients and one upstream address, into which a
// test injects network faults. Its methods are meant for the test goroutine
// that made it.
type Proxy struct {
	p        *toxiproxy.Proxy
	upstream string
}

// New starts a proxy on a free port of 127.0.0.1 to upstream ("host:port"),
// stopped in tb.Cleanup (which cuts its connections).
func New(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	name := fmt.Sprintf("faultproxy-%d", proxyCount.Add(1))
	p := toxiproxy.NewProxy(server, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		tb.Fatalf("faultproxy: start proxy to %s: %v", upstream, err)
	}
	tb.Cleanup(p.Stop)
	return &Proxy{p: p, upstream: upstream}
}

// Addr returns the proxy's address, "127.0.0.1:PORT"; it stays the same
// across Disable and Enable.
func (p *Proxy) Addr() string {
	p.p.Lock()
	defer p.p.Unlock()
	return p.p.Listen
}

// Upstream returns the address the proxy forwards to.
func (p *Proxy) Upstream() string { return p.upstream }

// DSN returns base, a go-sql-driver/mysql DSN, with its network and address
// replaced by the proxy's; everything else (user, database, parameters) is
// kept. It panics if base does not parse.
func (p *Proxy) DSN(base string) string {
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		panic(fmt.Sprintf("faultproxy: parse DSN %q: %v", base, err))
	}
	cfg.Net, cfg.Addr = "tcp", p.Addr()
	return cfg.FormatDSN()
}

// Blackhole stops all data in both directions, on open and new connections,
// while every connection stays open: a network partition or a vanished host
// without FIN or RST. Clients time out; the server keeps their sessions (and
// locks) until its own timeouts. Heal ends it, closing the connections that
// were blackholed.
func (p *Proxy) Blackhole(tb testing.TB) {
	tb.Helper()
	p.addBoth(tb, "blackhole", "timeout", map[string]any{"timeout": 0})
}

// Latency delays every chunk of data from the upstream by d, on open and new
// connections, so each round trip takes at least d longer. d is rounded up to
// whole milliseconds; a second call replaces the first one's d.
func (p *Proxy) Latency(tb testing.TB, d time.Duration) {
	tb.Helper()
	ms := (d + time.Millisecond - 1).Milliseconds()
	p.add(tb, "latency_downstream", "latency", "downstream", map[string]any{"latency": ms}, true)
}

// ResetPeer resets connections (RST, with SO_LINGER 0 on connections opened
// after the call; a plain close on older ones) as soon as data flows in
// either direction: a new connection at once (the server greets first), an
// idle open one at its next query.
func (p *Proxy) ResetPeer(tb testing.TB) {
	tb.Helper()
	p.addBoth(tb, "reset", "reset_peer", map[string]any{"timeout": 0})
}

// Heal removes every fault added by Blackhole, Latency and ResetPeer. New
// connections work again; connections that were blackholed are closed.
func (p *Proxy) Heal(tb testing.TB) {
	tb.Helper()
	p.p.Toxics.ResetToxics(context.Background())
}

// Disable stops the proxy: it stops listening (new connections are refused)
// and closes every open connection on both sides.
func (p *Proxy) Disable(tb testing.TB) {
	tb.Helper()
	p.p.Stop()
}

// Enable starts a disabled proxy again on the same address.
func (p *Proxy) Enable(tb testing.TB) {
	tb.Helper()
	if err := p.p.Start(); err != nil && err != toxiproxy.ErrProxyAlreadyStarted {
		tb.Fatalf("faultproxy: enable %s: %v", p.Addr(), err)
	}
}

func (p *Proxy) addBoth(tb testing.TB, name, typ string, attrs map[string]any) {
	tb.Helper()
	for _, stream := range []string{"upstream", "downstream"} {
		p.add(tb, name+"_"+stream, typ, stream, attrs, false)
	}
}

// add adds one toxic. One of that name already there is kept, or replaced
// if replace is set: toxiproxy's own update writes to the running toxic
// without a lock (a data race), so a replacement is a remove and an add.
func (p *Proxy) add(tb testing.TB, name, typ, stream string, attrs map[string]any, replace bool) {
	tb.Helper()
	if p.p.Toxics.GetToxic(name) != nil {
		if !replace {
			return
		}
		if err := p.p.Toxics.RemoveToxic(context.Background(), name); err != nil {
			tb.Fatalf("faultproxy: remove %s toxic: %v", typ, err)
		}
	}
	body, err := json.Marshal(map[string]any{
		"name": name, "type": typ, "stream": stream, "toxicity": 1.0, "attributes": attrs,
	})
	if err != nil {
		tb.Fatalf("faultproxy: %v", err)
	}
	if _, err := p.p.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
		tb.Fatalf("faultproxy: add %s toxic: %v", typ, err)
	}
}
