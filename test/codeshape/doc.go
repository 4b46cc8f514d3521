// Package codeshape holds the checks on the shape of the module's Go code
// that no compiler or vet makes: today, that no function is longer than
// maxFuncLines, so that each one can be read whole on a screen. It has no
// code of its own; the checks are its tests.
package codeshape
