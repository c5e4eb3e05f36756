package kubeletsim

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"sync"
)

// ipPool hands out pod IPs from 10.244.0.0/14, one per pod, and takes them
// back when the pod is gone. Like the host-local IPAM plugin it goes on from
// the last address it gave out, so a freed address is not reused at once.
type ipPool struct {
	mu   sync.Mutex
	next uint32
	used map[uint32]bool
}

const (
	poolBase = 10<<24 | 244<<16 // 10.244.0.0
	poolSize = 1 << 18          // a /14
)

func newIPPool() *ipPool { return &ipPool{used: map[uint32]bool{}} }

func (p *ipPool) allocate() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range poolSize {
		off := p.next
		p.next = (p.next + 1) % poolSize
		// Skip .0 and .255: valid in a /14, but they look wrong to people.
		if b := off & 0xff; b == 0 || b == 0xff || p.used[off] {
			continue
		}
		p.used[off] = true
		return addr(off), nil
	}
	return "", errors.New("no pod IP left in 10.244.0.0/14")
}

// reserve marks ip, given to a pod before a restart, as used.
func (p *ipPool) reserve(ip string) {
	if off, ok := offset(ip); ok {
		p.mu.Lock()
		p.used[off] = true
		p.mu.Unlock()
	}
}

func (p *ipPool) release(ip string) {
	if off, ok := offset(ip); ok {
		p.mu.Lock()
		delete(p.used, off)
		p.mu.Unlock()
	}
}

func addr(off uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], poolBase+off)
	return netip.AddrFrom4(b).String()
}

func offset(ip string) (uint32, bool) {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		return 0, false
	}
	b := a.As4()
	v := binary.BigEndian.Uint32(b[:])
	if v < poolBase || v >= poolBase+poolSize {
		return 0, false
	}
	return v - poolBase, true
}
