package otellock_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/namedlock/mysql/keyfmt"
	"github.com/namedlock/mysql/namedlock"
	"github.com/namedlock/mysql/namedlock/otellock"
	"github.com/namedlock/mysql/pool"
)

// exampleDSN is the server the example runs against: $MYSQL_TEST_DSN, or
// the local test server.
func exampleDSN() string {
	if dsn := os.Getenv("MYSQL_TEST_DSN"); dsn != "" {
		return dsn
	}
	return "root@tcp(127.0.0.1:3306)/test"
}

func ExampleNew() {
	lockDB, err := pool.Open(exampleDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer lockDB.Close()

	// A manual reader stands for the application's exporter here.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	obs, err := otellock.New(otellock.WithMeterProvider(mp), otellock.WithKeyPrefix(keyfmt.Prefix))
	if err != nil {
		log.Fatal(err)
	}
	locker, err := namedlock.New(lockDB, namedlock.WithObserver(obs.Observe))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	obs.Watch(locker)

	key := keyfmt.Key("report", "example-"+strconv.Itoa(os.Getpid()))
	if err := locker.Do(context.Background(), key, func(context.Context) error { return nil }); err != nil {
		log.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	var lines []string
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			if m.Name == "namedlock.hold.duration" {
				dp := d.DataPoints[0]
				lines = append(lines, fmt.Sprintf("%s (%s) %s: count %d", m.Name, m.Unit, attrs(dp.Attributes), dp.Count))
			}
		case metricdata.Sum[int64]:
			if m.Name == "namedlock.acquisitions" {
				for _, dp := range d.DataPoints {
					lines = append(lines, fmt.Sprintf("%s %s: %d", m.Name, attrs(dp.Attributes), dp.Value))
				}
			}
		}
	}
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// namedlock.acquisitions {namedlock.outcome=handoff}: 0
	// namedlock.acquisitions {namedlock.outcome=not_acquired}: 0
	// namedlock.acquisitions {namedlock.outcome=server}: 1
	// namedlock.hold.duration (s) {namedlock.key.prefix=report, namedlock.outcome=released}: count 1
}

// attrs formats set as {key=value, ...}.
func attrs(set attribute.Set) string {
	var kvs []string
	for _, kv := range set.ToSlice() {
		kvs = append(kvs, string(kv.Key)+"="+kv.Value.String())
	}
	return "{" + strings.Join(kvs, ", ") + "}"
}
