// Package codeshape holds the checks on the shape of the module's Go code
// that no compiler or vet makes: that no function is longer than
// maxFuncLines, so that each one can be read whole on a screen; that every
// library package says what it owns in a doc.go; and that the packages
// import one way (importRules), the protocol below the transports, the
// transports below the daemon, and the management API and its command
// line outside the daemon. It has no code of its own; the checks are its
// tests.
package codeshape
