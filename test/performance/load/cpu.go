package load

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandgate-dev/sandgate/test/env/proc"
	"github.com/sandgate-dev/sandgate/test/env/scrape"
	"github.com/sandgate-dev/sandgate/test/performance/report"
)

// cpuWindow measures kube-apiserver's CPU from just before the first claim's create call to
// the watch event of the last claim's Ready: the cost of the claims themselves, whatever the
// operator does after them (refill). With Probes.APIServerCPU the end is read in the watch's
// own goroutine at each Ready event, so the window closes at the last one and not at the
// next poll; without it, process_cpu_seconds_total is scraped once the run saw every claim
// Ready (a cluster the load generator did not start).
type cpuWindow struct {
	r     *runner
	w     *ClaimWatcher
	start float64
	ok    bool

	mu     sync.Mutex
	last   float64
	lastOK bool

	// machine is the machine's and the run's own CPU when the window opened, lastSample
	// when otherWork closed it.
	machine, lastSample machineSample
}

func (r *runner) startCPUWindow(ctx context.Context, w *ClaimWatcher) *cpuWindow {
	cw := &cpuWindow{r: r, w: w, machine: r.sampleMachine()}
	if read := r.probes.APIServerCPU; read != nil {
		if v, err := read(); err == nil {
			cw.start, cw.ok = v, true
		}
		w.OnReady(func(time.Time) {
			if v, err := read(); err == nil {
				cw.mu.Lock()
				cw.last, cw.lastOK = v, true
				cw.mu.Unlock()
			}
		})
		return cw
	}
	if snap, err := scrape.FromAPIServer(ctx, r.rest); err == nil {
		cw.start, cw.ok = snap.Sum("process_cpu_seconds_total", nil), true
	}
	return cw
}

// end closes the window and returns its CPU seconds, -1 when they could not be read.
func (cw *cpuWindow) end(ctx context.Context) float64 {
	if read := cw.r.probes.APIServerCPU; read != nil {
		cw.w.OnReady(nil)
		cw.mu.Lock()
		last, ok := cw.last, cw.lastOK
		cw.mu.Unlock()
		if !ok {
			v, err := read()
			last, ok = v, err == nil
		}
		if !cw.ok || !ok {
			return -1
		}
		return round2(last - cw.start)
	}
	snap, err := scrape.FromAPIServer(ctx, cw.r.rest)
	if err != nil || !cw.ok {
		return -1
	}
	return round2(snap.Sum("process_cpu_seconds_total", nil) - cw.start)
}

// machineSample is the CPU the whole machine and this run's own processes (the load
// generator, the operator, the local control plane) had used at one moment.
type machineSample struct {
	at         time.Time
	busy, ours float64
	// self is the load generator's own CPU; selfOK when it was read.
	self   float64
	selfOK bool
	ok     bool
}

// sampleMachine reads /proc/stat and the run's processes; ok is false when one of them
// cannot be read (a cluster the run did not start: its processes are elsewhere).
func (r *runner) sampleMachine() machineSample {
	s := machineSample{at: time.Now()}
	if self, err := proc.CPUSeconds("/proc", os.Getpid()); err == nil {
		s.self, s.selfOK = self, true
	}
	if r.probes.ComponentUsage == nil {
		return s
	}
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	if s.busy, err = busyCPUSeconds(string(data)); err != nil {
		return s
	}
	self, err := proc.CPUSeconds("/proc", os.Getpid())
	if err != nil {
		return s
	}
	s.ours = self
	for _, u := range r.probes.ComponentUsage() {
		s.ours += u.CPUSeconds
	}
	if r.probes.OperatorUsage != nil {
		u, err := r.probes.OperatorUsage()
		if err != nil {
			return s
		}
		s.ours += u.CPUSeconds
	}
	if r.probes.StandInUsage != nil {
		u, err := r.probes.StandInUsage()
		if err != nil {
			return s
		}
		s.ours += u.CPUSeconds
	}
	s.ok = true
	return s
}

// selfCPU is the load generator's own CPU seconds between the window's opening and the last
// otherWork sample; 0 when not measured.
func (cw *cpuWindow) selfCPU() float64 {
	if !cw.machine.selfOK || !cw.lastSample.selfOK {
		return 0
	}
	return round2(cw.lastSample.self - cw.machine.self)
}

// otherWork is the CPU the machine spent outside the run's processes between the window's
// opening and now: the other work of a shared machine, which slows every figure of the run.
// Unlike the load average (a one-minute mean taken at the start) it covers exactly the
// window. nil when not measurable.
func (cw *cpuWindow) otherWork() *report.OtherWork {
	end := cw.r.sampleMachine()
	cw.lastSample = end
	start := cw.machine
	if !start.ok || !end.ok {
		return nil
	}
	return &report.OtherWork{
		CPUSeconds:     round2(max(0, (end.busy-start.busy)-(end.ours-start.ours))),
		BusyCPUSeconds: round2(end.busy - start.busy),
		WindowSeconds:  round2(end.at.Sub(start.at).Seconds()),
		CPUs:           runtime.NumCPU(),
	}
}

// busyCPUSeconds returns the CPU time the machine spent busy (everything but idle and
// iowait) from the content of /proc/stat, whose first line sums every CPU in USER_HZ ticks.
func busyCPUSeconds(stat string) (float64, error) {
	line, _, _ := strings.Cut(stat, "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, errors.New("parsing /proc/stat: no cpu line")
	}
	var busy uint64
	// user nice system idle iowait irq softirq steal (guest time is inside user already).
	for i, f := range fields[1:9] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parsing /proc/stat: %w", err)
		}
		if i == 3 || i == 4 {
			continue
		}
		busy += v
	}
	return float64(busy) / 100, nil
}
