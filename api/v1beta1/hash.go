package v1beta1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
)

// NameHash is the FNV-1a 32-bit hash of a name as 8 lowercase hex characters: the value of
// LabelSandboxNameHash, LabelSandboxTemplateRefHash and LabelWarmPoolSandbox.
func NameHash(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("%08x", h.Sum32())
}

// blueprintHashLen is the number of hex characters kept: 128 bits, so that nobody who may
// write a template can search a benign and an evil blueprint of the same hash (a 64-bit hash
// takes about 2^32 tries), and still short enough for a label value (63 characters).
const blueprintHashLen = 32

// BlueprintHash identifies a version of a blueprint: the value of LabelSandboxTemplateHash on
// pool members and of the stamp on claims. It is the SHA-256 of the blueprint's JSON encoding,
// which is canonical (struct fields in declaration order, map keys sorted, empty optional fields
// omitted), so it does not depend on map iteration order and does not change when a newer API
// adds an optional field nobody sets.
//
// Every field of a blueprint is plain data whose JSON encoding cannot fail, so an encoding error
// is a programming error (a new field of an unencodable type) and panics.
func BlueprintHash(bp *SandboxBlueprint) string {
	raw, err := json.Marshal(bp)
	if err != nil {
		panic(fmt.Sprintf("encoding a SandboxBlueprint cannot fail, but did: %v", err))
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])[:blueprintHashLen]
}
