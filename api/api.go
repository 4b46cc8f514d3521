package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/fabrics"
	"github.com/nvmeof-tgt/nvmeof-tgt/gateway"
	"github.com/sirupsen/logrus"
)

// APIVersion is the version of the management API's methods and types.
// It changes only when a method or a field changes incompatibly; adding a
// method or an optional field keeps it.
const APIVersion = 1

// Daemon is what the API reads and changes: the daemon, or a stand-in
// in the fuzz test that validates without opening anything.
type Daemon interface {
	Running() *config.Config
	Apply(next *config.Config) error
	Reload(path string) error // takes the edit lock itself
	LockEdits() (unlock func())
	Generation() (uint64, bool, time.Time)
	// Target is the running target, which get_state reports.
	Target() *fabrics.Target
	// Gateway is the gateway's name, its cookie and its groups' runners;
	// no runners without a gateway block.
	Gateway() (name, cookie string, runners []*gateway.Runner)
}

// Handler holds what the methods share across connections.
type Handler struct {
	m       Daemon
	cfgPath string // the file reload reads
	version string // the daemon's release, which get_version reports
	log     *logrus.Entry
	// write saves save_config's file; a variable so the fuzz test writes nothing.
	write   func(path string, data []byte) error
	connMu  sync.Mutex    // guards the fields below
	conns   map[Conn]bool // open connections, for shutdown
	closing bool
}

func NewHandler(m Daemon, cfgPath, version string, log *logrus.Entry) *Handler {
	return &Handler{m: m, cfgPath: cfgPath, version: version, log: log, write: config.WriteFileAtomic, conns: map[Conn]bool{}}
}

// method is one entry of the method table.
type method struct {
	call    func(s *session, params json.RawMessage) (any, error)
	changes bool // logged when it succeeds, as a configuration change
}

// typed binds a handler with typed parameters and result to the table.
func typed[P, R any](f func(*session, P) (R, error), changes bool) method {
	return method{changes: changes, call: func(s *session, raw json.RawMessage) (any, error) {
		var p P
		if err := decodeParams(raw, &p); err != nil {
			return nil, err
		}
		return f(s, p)
	}}
}

// methods is the management API: docs/operations.md documents each entry.
var methods = map[string]method{
	"get_version":       typed((*session).getVersion, false),
	"get_state":         typed((*session).getState, false),
	"save_config":       typed((*session).saveConfig, false),
	"reload":            typed((*session).reloadConfig, true),
	"add_port":          typed((*session).addPort, true),
	"remove_port":       typed((*session).removePort, true),
	"add_subsystem":     typed((*session).addSubsystem, true),
	"set_subsystem":     typed((*session).setSubsystem, true),
	"remove_subsystem":  typed((*session).removeSubsystem, true),
	"add_namespace":     typed((*session).addNamespace, true),
	"set_namespace":     typed((*session).setNamespace, true),
	"remove_namespace":  typed((*session).removeNamespace, true),
	"add_host":          typed((*session).addHost, true),
	"remove_host":       typed((*session).removeHost, true),
	"set_host":          typed((*session).setHost, true),
	"set_ana_state":     typed((*session).setANAState, true),
	"release_ana_group": typed((*session).releaseANAGroup, true),
}

// unknownField reads the name out of encoding/json's DisallowUnknownFields error.
var unknownField = regexp.MustCompile(`^json: unknown field "(.*)"$`)

// decodeParams reads by-name params strictly: an unknown name or a
// value of the wrong type is invalid params, naming the parameter.
func decodeParams(raw json.RawMessage, p any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return paramError("params", "invalid params: params must be an object of named parameters")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(p)
	var te *json.UnmarshalTypeError
	var re *Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re):
		return re
	case errors.As(err, &te):
		return paramError(te.Field, "invalid params: %s: %s is not a valid %s", te.Field, te.Value, te.Type)
	}
	if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
		return paramError(m[1], "invalid params: unknown parameter %q", m[1])
	}
	return paramError("params", "invalid params: %v", err)
}

type VersionParams struct {
	APIVersion int `json:"api_version,omitempty"` // the version the client speaks; 0: any
}

type VersionResult struct {
	Version    string `json:"version"`     // the daemon's release
	APIVersion int    `json:"api_version"` // apiVersion
}

// getVersion is the handshake: the first call on every connection.
func (s *session) getVersion(p VersionParams) (VersionResult, error) {
	if p.APIVersion != 0 && p.APIVersion != APIVersion {
		return VersionResult{}, newError(CodeVersionMismatch,
			fmt.Sprintf("API version %d is not supported: nvmeof-tgt %s speaks version %d", p.APIVersion, s.api.version, APIVersion),
			&ErrorData{Field: "api_version", APIVersions: []int{APIVersion}})
	}
	s.greeted = true
	return VersionResult{Version: s.api.version, APIVersion: APIVersion}, nil
}

type NoParams struct{}

func (s *session) getState(NoParams) (State, error) {
	return StateOf(s.api.m), nil
}

type SaveParams struct {
	Path string `json:"path,omitempty"` // also write the YAML there (absolute, replaced atomically)
}

type SaveResult struct {
	YAML string `json:"yaml"`
	Path string `json:"path,omitempty"`
	// Redacted counts the inline DH-HMAC-CHAP secrets written as
	// config.Redacted: the YAML does not carry them (key files stay
	// references), so -check refuses it until they are put back.
	Redacted int    `json:"redacted_secrets,omitempty"`
	Note     string `json:"note,omitempty"`
}

// saveConfig returns the running configuration as YAML that -check
// accepts and a daemon starts from with the same state.
func (s *session) saveConfig(p SaveParams) (SaveResult, error) {
	if p.Path != "" && !filepath.IsAbs(p.Path) {
		return SaveResult{}, paramError("path", "invalid params: path %q is not absolute", p.Path)
	}
	running := s.api.m.Running()
	note := ""
	if g := running.Gateway; g != nil && g.SharedConfig {
		// The subsystems are the group's, kept in RADOS: the file keeps
		// this daemon's own settings.
		running.Subsystems = nil
		note = fmt.Sprintf("the subsystems are left out: the gateway group keeps them in its shared configuration (pool %s, object %s)", g.Pool, g.ConfigObject())
	}
	cfg, redacted := running.Redact()
	y, err := config.Marshal(cfg)
	if err != nil {
		return SaveResult{}, err
	}
	if redacted > 0 {
		note = fmt.Sprintf("%d inline DH-HMAC-CHAP secret(s) written as %s: put them back, or move them to dhchap_key_file / dhchap_ctrl_key_file, before loading this file", redacted, config.Redacted)
	}
	if p.Path != "" && redacted > 0 {
		// A file with redacted secrets would not start the daemon.
		return SaveResult{}, newError(CodeNotApplied, fmt.Sprintf("not writing %s: %s", p.Path, note), &ErrorData{Field: "path"})
	}
	if p.Path != "" {
		if err := s.api.write(p.Path, y); err != nil {
			return SaveResult{}, newError(CodeNotApplied, fmt.Sprintf("writing %s: %v", p.Path, err), &ErrorData{Field: "path"})
		}
	}
	return SaveResult{YAML: string(y), Path: p.Path, Redacted: redacted, Note: note}, nil
}

type ReloadResult struct {
	File       string `json:"file"`
	Generation uint64 `json:"generation"`
}

// reload re-reads the configuration file, as SIGHUP does.
func (s *session) reloadConfig(NoParams) (ReloadResult, error) {
	if err := s.api.m.Reload(s.api.cfgPath); err != nil {
		return ReloadResult{}, changeError(err, "")
	}
	gen, _, _ := s.api.m.Generation()
	return ReloadResult{File: s.api.cfgPath, Generation: gen}, nil
}

// ChangeResult is what every add_, set_ and remove_ method returns.
type ChangeResult struct {
	Generation uint64 `json:"generation"`     // the configuration generation the change made
	NSID       uint32 `json:"nsid,omitempty"` // add_namespace: the NSID, also when the daemon chose it
}

// change runs one edit of the running configuration through apply, with
// the validation and difference a reload has. edit returns the
// configuration path of the item it added or changed.
func (a *Handler) change(edit func(c *config.Config) (item string, err error)) (ChangeResult, error) {
	// Under the daemon's edit lock no reload or other client's change can
	// come between reading the running configuration and applying the
	// edit of it, nor between the apply and the generation it reports.
	defer a.m.LockEdits()()
	next := a.m.Running()
	item, err := edit(next)
	if err != nil {
		return ChangeResult{}, err
	}
	next.ApplyDefaults() // what the edit added gets the limits a file would
	if err := a.m.Apply(next); err != nil {
		return ChangeResult{}, changeError(err, item)
	}
	gen, _, _ := a.m.Generation()
	return ChangeResult{Generation: gen}, nil
}
