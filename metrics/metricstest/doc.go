// Package metricstest scrapes a Prometheus collector in a test, as a
// Prometheus server would, with the registry's consistency checks.
package metricstest
