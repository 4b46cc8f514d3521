package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

// Error codes of the management API. The first five are JSON-RPC 2.0's;
// the others are ours, stable, in the range the specification leaves to
// applications. docs/operations.md lists them.
const (
	codeParseError     = -32700 // not JSON; the connection closes
	codeInvalidRequest = -32600 // not a request object, or larger than maxRequest (the connection closes)
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602 // a parameter is unknown, of the wrong type, missing or malformed
	codeInternal       = -32603

	codeHandshakeRequired = -32001 // get_version must come first
	codeVersionMismatch   = -32002 // the client speaks an API version this daemon does not
	codePermissionDenied  = -32003 // the peer is neither root nor the daemon's user; the connection closes
	codeNotFound          = -32004 // the subsystem, namespace, port or host named does not exist
	codeAlreadyExists     = -32005
	codeValidationFailed  = -32006 // the resulting configuration does not validate; nothing changed
	codeNotApplied        = -32007 // validation passed, but opening a backend or a port failed; nothing changed
	codeAppliedInPart     = -32008 // the items named were left out; the rest is applied
	codeInUse             = -32009 // something else depends on it (a port a subsystem is limited to)
)

// rpcError is a JSON-RPC error object, also as the client decodes it.
type rpcError struct {
	Code    int        `json:"code"`
	Message string     `json:"message"`
	Data    *errorData `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return e.Message }

// errorData says where a problem is. Field is a request parameter
// ("nsid") for invalid params, not found and already exists, and the
// configuration path -check prints ("subsystems[0].namespaces[1].path")
// for the errors of a change; Param then names the request parameter
// that path came from, when it did.
type errorData struct {
	Field  string       `json:"field,omitempty"`
	Param  string       `json:"param,omitempty"`
	Errors []fieldError `json:"errors,omitempty"` // every problem, for validation failed and applied in part

	APIVersions []int `json:"api_versions,omitempty"` // version mismatch: what this daemon speaks
	Limit       int   `json:"limit,omitempty"`        // request too large: the most bytes a request line may have
}

// fieldError is one problem at a configuration path.
type fieldError struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func newError(code int, msg string, data *errorData) *rpcError {
	return &rpcError{Code: code, Message: msg, Data: data}
}

func paramError(field, format string, a ...any) *rpcError {
	return newError(codeInvalidParams, fmt.Sprintf(format, a...), &errorData{Field: field})
}

func notFound(field, format string, a ...any) *rpcError {
	return newError(codeNotFound, fmt.Sprintf(format, a...), &errorData{Field: field})
}

func alreadyExists(field, format string, a ...any) *rpcError {
	return newError(codeAlreadyExists, fmt.Sprintf(format, a...), &errorData{Field: field})
}

func errPermission(err error) *rpcError {
	return newError(codePermissionDenied, err.Error(), nil)
}

func errRequestTooLarge() *rpcError {
	return newError(codeInvalidRequest, fmt.Sprintf("invalid request: larger than %d bytes", maxRequest), &errorData{Limit: maxRequest})
}

func errInternal(err error) *rpcError {
	return newError(codeInternal, "internal error: "+err.Error(), nil)
}

// toRPCError passes API errors through; anything else is internal.
func toRPCError(err error) *rpcError {
	var re *rpcError
	if errors.As(err, &re) {
		return re
	}
	return errInternal(err)
}

// leadingPath matches the configuration path an error message starts
// with, as apply and validation write it: "subsystems[0].namespaces[1]: ...".
var leadingPath = regexp.MustCompile(`^([a-z_]+(?:\[\d+\])?(?:\.[a-z_]+(?:\[\d+\])?)*): `)

// changeError turns what apply or reload returned into an API error.
// item is the configuration path of what the request added or changed
// ("ports[2]"), so a problem under it also names the request parameter.
func changeError(err error, item string) *rpcError {
	var verrs config.Errors
	var partial *partialError
	var issues []fieldError
	code := codeNotApplied
	switch {
	case errors.As(err, &verrs):
		code = codeValidationFailed
		for _, v := range verrs {
			issues = append(issues, fieldError{v.Path, v.Msg})
		}
	case errors.As(err, &partial):
		code = codeAppliedInPart
		for _, e := range partial.errs {
			issues = append(issues, splitPath(e.Error()))
		}
	}
	if len(issues) == 0 {
		issues = []fieldError{splitPath(err.Error())}
	}
	data := &errorData{Field: issues[0].Field, Errors: issues}
	if item != "" && strings.HasPrefix(data.Field, item+".") {
		data.Param = strings.TrimPrefix(data.Field, item+".")
	}
	return newError(code, err.Error(), data)
}

func splitPath(msg string) fieldError {
	if m := leadingPath.FindStringSubmatch(msg); m != nil {
		return fieldError{m[1], strings.TrimPrefix(msg, m[0])}
	}
	return fieldError{Message: msg}
}
