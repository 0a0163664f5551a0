// Package policy holds the rules that admission and the controllers both apply, written once:
// what a Sandbox built from a template (and for a claim) is, the hash that identifies it, which
// pod label and annotation keys users may not set, which owner reference makes an object
// a claim's or a pool's, and how a WarmPoolAutoscaler's schedules and steps read. Every function is pure: no API reads, no clock. The webhooks turn the
// returned field.ErrorList into 422 responses; the controllers into condition messages.
package policy
