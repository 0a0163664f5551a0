package builders

import (
	"fmt"

	agentsv1beta1 "github.com/sandgate-dev/sandgate/api/v1beta1"
)

// CollidingName returns a DNS-1123 label, other than name, whose agentsv1beta1.NameHash
// (FNV-1a, 32 bits) equals name's: what an attacker computes in well under a second to make the
// public name-hash labels of their objects equal a victim's. It meets in the middle: FNV-1a's
// last steps can be run backwards (the multiplier is odd, so invertible modulo 2^32), so
// prefixes hashed forward and suffixes unwound from the target meet after about 2^16 of each.
func CollidingName(name string) string {
	const (
		offset = 2166136261
		prime  = 16777619
		chars  = "abcdefghijklmnopqrstuvwxyz0123456789"
		half   = 4
	)
	var target uint32
	if _, err := fmt.Sscanf(agentsv1beta1.NameHash(name), "%08x", &target); err != nil {
		panic(fmt.Sprintf("NameHash(%q) is not 8 hex digits: %v", name, err))
	}
	inverse := uint32(1) // prime^-1 mod 2^32, by Newton's iteration
	for range 5 {
		inverse *= 2 - prime*inverse
	}
	forward := map[uint32]string{}
	var walk func(prefix string, h uint32, depth int, visit func(string, uint32) bool) bool
	walk = func(prefix string, h uint32, depth int, visit func(string, uint32) bool) bool {
		if depth == 0 {
			return visit(prefix, h)
		}
		for i := range len(chars) {
			if walk(prefix+chars[i:i+1], h, depth-1, visit) {
				return true
			}
		}
		return false
	}
	// Forward: "x" + 4 characters, hashed from the offset basis.
	walk("", 0, half, func(p string, _ uint32) bool {
		h := uint32(offset)
		for _, c := range []byte("x" + p) {
			h = (h ^ uint32(c)) * prime
		}
		forward[h] = "x" + p
		return false
	})
	// Backward: 4 characters unwound from the target; a state that a prefix reaches is a name.
	var found string
	walk("", 0, half, func(s string, _ uint32) bool {
		h := target
		for i := len(s) - 1; i >= 0; i-- {
			h = (h * inverse) ^ uint32(s[i])
		}
		if p, ok := forward[h]; ok && p+s != name {
			found = p + s
			return true
		}
		return false
	})
	if found == "" {
		panic("no colliding name found for " + name)
	}
	return found
}
