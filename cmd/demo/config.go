package main

import (
	"errors"
	"fmt"
	"time"
)

// Config is what one demo run needs besides the server: the size of the
// story and the names it uses.
type Config struct {
	Instances int           // simulated application instances, each with its own pools and Locker
	Workers   int           // concurrent orders per instance
	Orders    int           // orders per round, spread over the instances
	Stock     int           // initial stock of the product
	Think     time.Duration // pause between reading the stock and writing it back
	Prefix    string        // prefix of the table names and of the lock key
}

// DefaultConfig is what the demo runs with when no flag says otherwise:
// about ten seconds on a 2-core machine, on either server.
var DefaultConfig = Config{
	Instances: 4,
	Workers:   8,
	Orders:    750,
	Stock:     250,
	Think:     10 * time.Millisecond,
	Prefix:    "namedlock_demo_",
}

// productID is the one product every order is for.
const productID = 1

// validate reports the first out-of-range field.
func (c Config) validate() error {
	switch {
	case c.Instances < 1:
		return fmt.Errorf("-instances %d: must be at least 1", c.Instances)
	case c.Workers < 1:
		return fmt.Errorf("-workers %d: must be at least 1", c.Workers)
	case c.Orders < 1:
		return fmt.Errorf("-orders %d: must be at least 1", c.Orders)
	case c.Stock < 0:
		return fmt.Errorf("-stock %d: must not be negative", c.Stock)
	case c.Think < 0:
		return fmt.Errorf("-think %v: must not be negative", c.Think)
	}
	if c.Prefix == "" || len(c.Prefix) > 40 {
		return errors.New("-table-prefix: must be 1 to 40 characters")
	}
	for _, r := range c.Prefix {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '_') {
			return fmt.Errorf("-table-prefix %q: only a-z, 0-9 and _ are allowed", c.Prefix)
		}
	}
	return nil
}

// split spreads n items over k parts as evenly as possible, the first parts
// taking the remainder.
func split(n, k int) []int {
	parts := make([]int, k)
	for i := range parts {
		parts[i] = n / k
		if i < n%k {
			parts[i]++
		}
	}
	return parts
}
