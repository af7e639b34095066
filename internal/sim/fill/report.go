package fill

// WriteReport writes the curves, the table and the chart of an experiment.
func WriteReport(dir, podsPath string, e *Experiment, results map[string][]*Result) error {
	return nil
}
