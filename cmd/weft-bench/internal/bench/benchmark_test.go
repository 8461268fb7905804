package bench

import (
	"context"
	"strings"
	"testing"
)

// The benchmarks below run the suite's in-process figures at full size
// through the same functions as weft-bench, one measurement per
// iteration, and report its figures as metrics:
//
//	go test ./cmd/weft-bench/internal/bench -run '^$' -bench . -benchtime 1x
//
// The process figures (one-shot run, warm turns, host RSS) need the weft
// binary: run them with `weft-bench --only 'oneshot|warm-turn|host-rss'`.

func BenchmarkRunStart(b *testing.B) {
	sz := sizesFor(false)
	for b.Loop() {
		res, err := measureRunStart(context.Background(), b.TempDir(), sz.historyEvents, sz.runStarts)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(ms(res.long.median()), "p50-ms")
		b.ReportMetric(ms(res.long.quantile(0.99)), "p99-ms")
		b.ReportMetric(ms(res.empty.median()), "new-session-p50-ms")
		b.ReportMetric(ms(res.cold), "first-ms")
		b.ReportMetric(ms(res.coldLog), "first-no-snapshot-ms")
	}
}

func BenchmarkIdleSessions(b *testing.B) {
	sz := sizesFor(false)
	for b.Loop() {
		res, err := measureIdleSessions(context.Background(), b.TempDir(), sz.idleSessions)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(res.after.RSS)/1e6, "rss-MB")
		b.ReportMetric(float64(res.after.RSS-res.before.RSS)/float64(res.sessions), "bytes/session")
		b.ReportMetric(float64(res.goroutines)/float64(res.sessions), "goroutines/session")
	}
}

func BenchmarkFanoutInProcess(b *testing.B) {
	sz := sizesFor(false)
	for b.Loop() {
		res, err := measureFanoutInProcess(context.Background(), b.TempDir(), sz.fanoutSubs, sz.fanoutRuns, sz.fanoutSteps)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(ms(res.lat.quantile(0.99)), "p99-ms")
		b.ReportMetric(res.withRate, "events/s")
		b.ReportMetric(res.aloneRate, "alone-events/s")
		b.ReportMetric(float64(res.lagged), "lagged")
	}
}

func BenchmarkFanoutWire(b *testing.B) {
	sz := sizesFor(false)
	for _, paced := range []bool{false, true} {
		for _, sse := range []bool{false, true} {
			name := "burst/ws"
			if paced {
				name = "paced/ws"
			}
			if sse {
				name = strings.TrimSuffix(name, "ws") + "sse"
			}
			b.Run(name, func(b *testing.B) {
				runs := sz.wireRuns
				if paced {
					runs = 1
				}
				for b.Loop() {
					res, err := measureFanoutWire(context.Background(), b.TempDir(), sz.wireSubs, runs, sz.fanoutSteps, sse, paced)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(ms(res.lat.quantile(0.99)), "p99-ms")
					b.ReportMetric(res.rate, "events/s")
					b.ReportMetric(float64(res.perDelivered(res.hostCPU))/1e3, "host-cpu-µs/delivered")
					b.ReportMetric(float64(res.aloneCPU)/1e3, "alone-cpu-µs/event")
					b.ReportMetric(float64(res.perDelivered(res.clientCPU))/1e3, "client-cpu-µs/delivered")
					b.ReportMetric(float64(res.delivered)/float64(max(res.events*int64(res.subs), 1)), "delivered")
				}
			})
		}
	}
}

func BenchmarkAppend(b *testing.B) {
	sz := sizesFor(false)
	for b.Loop() {
		res, err := measureAppend(context.Background(), b.TempDir(), sz.appendRounds, sz.append1, sz.append64)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(medianRate(res.store1), "batch1-events/s")
		b.ReportMetric(medianRate(res.store1)/medianRate(res.raw1), "batch1-share-of-raw")
		b.ReportMetric(medianRate(res.store64), "batch64-events/s")
	}
}

func BenchmarkSandboxStart(b *testing.B) {
	sz := sizesFor(false)
	for b.Loop() {
		res, err := measureSandboxStart(context.Background(), b.TempDir(), "", sz.sandboxStarts)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(ms(res.boxed.median()-res.plain.median()), "extra-ms")
		b.ReportMetric(ms(res.boxed.median()), "sandboxed-ms")
		b.ReportMetric(ms(res.plain.median()), "plain-ms")
		b.ReportMetric(ms(res.contained.median()), "contained-ms")
	}
}
