package report

import "strings"

// SplicedSections are the titles of the report's sections that stand apart from the tables of
// every run (Scenarios, Claims, API server, ...): a scenario that writes one can be measured
// alone and spliced into a report measured in full before (sandgate-bench --splice).
var SplicedSections = []string{sectionBursts, sectionTrace, sectionFairShare, sectionOverload}

// KeptSections are the titles of the report's sections measured apart from `make bench` (by the
// commands they show): no result renders them, and a report written again keeps them from the
// one it replaces (KeepSections).
var KeptSections = []string{SectionEncodings}

// SectionEncodings compares the Sandbox informer's encodings (the operator's --api-encoding).
const SectionEncodings = "## CBOR against JSON"

const (
	sectionBursts    = "## Rapid bursts"
	sectionTrace     = "## Demand trace: warm pool policies"
	sectionFairShare = "## Fair share: two tenants on one pool"
	sectionOverload  = "## Overload: past the sustainable rate"
	// spliceBefore is the section a spliced section is put before when the report lacks it:
	// where WriteMarkdown writes them.
	spliceBefore = "## Startup latency"
)

// SpliceSections replaces in report each of SplicedSections that fresh has, section by
// section (from its title to the next "## " title), and inserts those report lacks before
// its startup latency section (at its end when it has none). It returns the new report and
// the titles it took from fresh, in fresh's order.
func SpliceSections(report, fresh string) (string, []string) {
	return splice(report, fresh, SplicedSections)
}

// KeepSections puts into fresh, a report just rendered, each of KeptSections that old, the
// report it replaces, has, before its startup latency section (no result renders them).
func KeepSections(fresh, old string) string {
	kept, _ := splice(fresh, old, KeptSections)
	return kept
}

// splice replaces in report each section of titles that fresh has, or inserts it.
func splice(report, fresh string, titles []string) (string, []string) {
	var taken []string
	for _, title := range titles {
		section, ok := sectionOf(fresh, title)
		if !ok {
			continue
		}
		taken = append(taken, title)
		if start, end, ok := sectionBounds(report, title); ok {
			report = report[:start] + section + report[end:]
			continue
		}
		if at, _, ok := sectionBounds(report, spliceBefore); ok {
			report = report[:at] + section + report[at:]
			continue
		}
		report = strings.TrimRight(report, "\n") + "\n\n" + section
	}
	return report, taken
}

// sectionOf is the section of doc under title, up to the next section's title.
func sectionOf(doc, title string) (string, bool) {
	start, end, ok := sectionBounds(doc, title)
	if !ok {
		return "", false
	}
	return doc[start:end], true
}

// sectionBounds finds the line title in doc and the start of the next "## " line after it (or
// the end of doc).
func sectionBounds(doc, title string) (start, end int, ok bool) {
	switch {
	case strings.HasPrefix(doc, title+"\n"):
		start = 0
	default:
		i := strings.Index(doc, "\n"+title+"\n")
		if i < 0 {
			return 0, 0, false
		}
		start = i + 1
	}
	rest := doc[start+len(title)+1:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		return start, start + len(title) + 1 + j + 1, true
	}
	return start, len(doc), true
}
