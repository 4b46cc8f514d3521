package api

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
	CodeParseError     = -32700 // not JSON; the connection closes
	CodeInvalidRequest = -32600 // not a request object, or larger than maxRequest (the connection closes)
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602 // a parameter is unknown, of the wrong type, missing or malformed
	CodeInternal       = -32603

	CodeHandshakeRequired = -32001 // get_version must come first
	CodeVersionMismatch   = -32002 // the client speaks an API version this daemon does not
	CodePermissionDenied  = -32003 // the peer is neither root nor the daemon's user; the connection closes
	CodeNotFound          = -32004 // the subsystem, namespace, port or host named does not exist
	CodeAlreadyExists     = -32005
	CodeValidationFailed  = -32006 // the resulting configuration does not validate; nothing changed
	CodeNotApplied        = -32007 // validation passed, but opening a backend or a port failed; nothing changed
	CodeAppliedInPart     = -32008 // the items named were left out; the rest is applied
	CodeInUse             = -32009 // something else depends on it (a port a subsystem is limited to)
)

// Error is a JSON-RPC error object, also as the client decodes it.
type Error struct {
	Code    int        `json:"code"`
	Message string     `json:"message"`
	Data    *ErrorData `json:"data,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// ErrorData says where a problem is. Field is a request parameter
// ("nsid") for invalid params, not found and already exists, and the
// configuration path -check prints ("subsystems[0].namespaces[1].path")
// for the errors of a change; Param then names the request parameter
// that path came from, when it did.
type ErrorData struct {
	Field  string       `json:"field,omitempty"`
	Param  string       `json:"param,omitempty"`
	Errors []FieldError `json:"errors,omitempty"` // every problem, for validation failed and applied in part

	APIVersions []int `json:"api_versions,omitempty"` // version mismatch: what this daemon speaks
	Limit       int   `json:"limit,omitempty"`        // request too large: the most bytes a request line may have
}

// FieldError is one problem at a configuration path.
type FieldError struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func newError(code int, msg string, data *ErrorData) *Error {
	return &Error{Code: code, Message: msg, Data: data}
}

func paramError(field, format string, a ...any) *Error {
	return newError(CodeInvalidParams, fmt.Sprintf(format, a...), &ErrorData{Field: field})
}

func notFound(field, format string, a ...any) *Error {
	return newError(CodeNotFound, fmt.Sprintf(format, a...), &ErrorData{Field: field})
}

func alreadyExists(field, format string, a ...any) *Error {
	return newError(CodeAlreadyExists, fmt.Sprintf(format, a...), &ErrorData{Field: field})
}

func errPermission(err error) *Error {
	return newError(CodePermissionDenied, err.Error(), nil)
}

func errRequestTooLarge() *Error {
	return newError(CodeInvalidRequest, fmt.Sprintf("invalid request: larger than %d bytes", MaxRequest), &ErrorData{Limit: MaxRequest})
}

func errInternal(err error) *Error {
	return newError(CodeInternal, "internal error: "+err.Error(), nil)
}

// toRPCError passes API errors through; anything else is internal.
func toRPCError(err error) *Error {
	var re *Error
	if errors.As(err, &re) {
		return re
	}
	return errInternal(err)
}

// leadingPath matches the configuration path an error message starts
// with, as apply and validation write it: "subsystems[0].namespaces[1]: ...".
var leadingPath = regexp.MustCompile(`^([a-z_]+(?:\[\d+\])?(?:\.[a-z_]+(?:\[\d+\])?)*): `)

// appliedInPart is an error of Daemon.Apply or Reload that reports what
// it could not do once it had started changing the running target; the
// rest is applied.
type appliedInPart interface {
	error
	AppliedInPart() []error
}

// changeError turns what apply or reload returned into an API error.
// item is the configuration path of what the request added or changed
// ("ports[2]"), so a problem under it also names the request parameter.
func changeError(err error, item string) *Error {
	var verrs config.Errors
	var partial appliedInPart
	var issues []FieldError
	code := CodeNotApplied
	switch {
	case errors.As(err, &verrs):
		code = CodeValidationFailed
		for _, v := range verrs {
			issues = append(issues, FieldError{v.Path, v.Msg})
		}
	case errors.As(err, &partial):
		code = CodeAppliedInPart
		for _, e := range partial.AppliedInPart() {
			issues = append(issues, splitPath(e.Error()))
		}
	}
	if len(issues) == 0 {
		issues = []FieldError{splitPath(err.Error())}
	}
	data := &ErrorData{Field: issues[0].Field, Errors: issues}
	if item != "" && strings.HasPrefix(data.Field, item+".") {
		data.Param = strings.TrimPrefix(data.Field, item+".")
	}
	return newError(code, err.Error(), data)
}

func splitPath(msg string) FieldError {
	if m := leadingPath.FindStringSubmatch(msg); m != nil {
		return FieldError{m[1], strings.TrimPrefix(msg, m[0])}
	}
	return FieldError{Message: msg}
}
