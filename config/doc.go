// Package config is the daemon's YAML configuration: the schema, human
// sizes ("1GiB"), defaults, validation whose errors name the field path
// (subsystems[1].namespaces[0].backend), stable namespace UUIDs,
// marshalling back to a file that Load accepts, and the difference
// between two configurations (Diff) that a reload applies.
//
// It knows nothing of the running target.
package config
