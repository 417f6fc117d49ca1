package namedlock

// WithExperimentForTest switches on the change under measurement (see
// config.experiment) for the benchmarks' paired variant contender.
func WithExperimentForTest() Option {
	return func(c *config) error {
		c.experiment = true
		return nil
	}
}
