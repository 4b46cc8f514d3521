package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// The admin socket speaks JSON-RPC 2.0: one request object per line, any
// number of them per connection, each answered by one response line
// (notifications, requests without an id, are not answered). get_version
// must come first on every connection. api.go holds the methods.

const (
	// MaxRequest bounds one request line, so a client cannot make the
	// daemon buffer without limit.
	MaxRequest = 1 << 20
	// replyTimeout bounds the write of one response to a client that does
	// not read.
	replyTimeout = 10 * time.Second
	// acceptBackoff spaces out accept retries after an error such as
	// EMFILE, as net/http's server does.
	acceptBackoff = 100 * time.Millisecond
)

// IdleTimeout closes a connection that sends nothing; a variable for tests.
var IdleTimeout = 2 * time.Minute

var errTooLarge = errors.New("request too large")

// Conn is what a session reads requests from and writes responses to:
// a Unix socket connection, or an in-memory one in tests.
type Conn interface {
	io.ReadWriter
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// request is a JSON-RPC 2.0 request object. ID stays raw so that it is
// echoed exactly; a nil ID marks a notification.
type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// response is a JSON-RPC 2.0 response object: Result or Error.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

type Server struct {
	ln       net.Listener
	path     string
	api      *Handler
	wg       sync.WaitGroup
	accepted chan struct{} // closed when the accept loop has returned
}

// Listen listens on the admin socket, readable by root (and the
// daemon's own user) only.
func Listen(path string, d Daemon, cfgPath, version string, log *logrus.Entry) (*Server, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("control.socket: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("control.socket %s: another nvmeof-tgt answers there; stop it first, or give this one its own control.socket", path)
	}
	os.Remove(path) // a stale socket of a daemon that died
	old := unix.Umask(0o177)
	ln, err := net.Listen("unix", path)
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("control.socket %s: %w", path, err)
	}
	cs := &Server{ln: ln, path: path, api: NewHandler(d, cfgPath, version, log), accepted: make(chan struct{})}
	log.WithField("socket", path).Info("admin socket ready")
	go cs.accept()
	return cs, nil
}

func (cs *Server) accept() {
	defer close(cs.accepted)
	for {
		c, err := cs.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of file descriptors, say: the socket must keep
			// answering once they are back.
			cs.api.log.WithError(err).Warn("admin socket: accept failed; retrying")
			time.Sleep(acceptBackoff)
			continue
		}
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			defer c.Close()
			if err := checkPeer(c.(*net.UnixConn)); err != nil {
				c.SetWriteDeadline(time.Now().Add(replyTimeout))
				writeResponse(c, &response{ID: nullID, Error: errPermission(err)})
				return
			}
			cs.api.ServeConn(c)
		}()
	}
}

// Close stops accepting, ends idle connections and waits for the requests
// under way to finish.
func (cs *Server) Close() {
	cs.ln.Close()
	<-cs.accepted // no wg.Add after this
	cs.api.shutdown()
	cs.wg.Wait()
	os.Remove(cs.path)
}

// checkPeer admits root and the daemon's own user.
func checkPeer(c *net.UnixConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if cred.Uid != 0 && int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("permission denied: the admin socket is for root (uid %d asked)", cred.Uid)
	}
	return nil
}

// ServeConn answers the requests on c until the client hangs up, stays
// idle past idleTimeout, sends a line that is not JSON or too large, or
// the server shuts down.
func (a *Handler) ServeConn(c Conn) {
	if !a.track(c, true) {
		return
	}
	defer a.track(c, false)
	s := &session{api: a}
	r := bufio.NewReaderSize(c, 64<<10)
	for a.armRead(c) {
		line, rerr := readLine(r, MaxRequest)
		var resp *response
		fatal := rerr != nil
		switch {
		case errors.Is(rerr, errTooLarge):
			resp = &response{ID: nullID, Error: errRequestTooLarge()}
		case (rerr == nil || rerr == io.EOF) && len(bytes.TrimSpace(line)) > 0:
			// A last line without newline counts when the client closed
			// its side; not one cut short by the idle timeout or shutdown.
			var f bool
			resp, f = s.handle(line)
			fatal = fatal || f
		}
		if resp != nil {
			c.SetWriteDeadline(time.Now().Add(replyTimeout))
			if writeResponse(c, resp) != nil {
				return
			}
		}
		if fatal {
			return
		}
	}
}

// track adds or drops an open connection; it refuses new ones once the
// server shuts down.
func (a *Handler) track(c Conn, open bool) bool {
	a.connMu.Lock()
	defer a.connMu.Unlock()
	switch {
	case !open:
		delete(a.conns, c)
	case a.closing:
		return false
	default:
		a.conns[c] = true
	}
	return true
}

// armRead sets the idle deadline for the next request, unless the server
// shuts down.
func (a *Handler) armRead(c Conn) bool {
	a.connMu.Lock()
	defer a.connMu.Unlock()
	if a.closing {
		return false
	}
	c.SetReadDeadline(time.Now().Add(IdleTimeout))
	return true
}

// shutdown ends every connection waiting for a request; one being
// answered ends after its response.
func (a *Handler) shutdown() {
	a.connMu.Lock()
	defer a.connMu.Unlock()
	a.closing = true
	for c := range a.conns {
		c.SetReadDeadline(time.Now())
	}
}

// readLine reads up to and including '\n', or to the end of input; a line
// longer than limit is errTooLarge, read no further than that.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > limit {
			return nil, errTooLarge
		}
		line = append(line, frag...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

func writeResponse(w io.Writer, resp *response) error {
	resp.JSONRPC = "2.0"
	b, err := json.Marshal(resp)
	if err != nil {
		b, _ = json.Marshal(&response{JSONRPC: "2.0", ID: resp.ID, Error: errInternal(err)})
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// session is one connection's state: whether the handshake happened.
type session struct {
	api     *Handler
	greeted bool
}

// handle answers one request line. fatal says the connection must close:
// the line was not JSON, so the framing can no longer be trusted.
func (s *session) handle(line []byte) (resp *response, fatal bool) {
	if !json.Valid(line) {
		return &response{ID: nullID, Error: newError(CodeParseError, "parse error: the request is not valid JSON", nil)}, true
	}
	req, rerr := parseRequest(line)
	if rerr != nil {
		id := nullID
		if req != nil && req.ID != nil {
			id = req.ID // the envelope is wrong, but the id is usable
		}
		return &response{ID: id, Error: rerr}, false
	}
	result, err := s.call(req)
	if req.ID == nil { // a notification: no response, whatever happened
		return nil, false
	}
	if err != nil {
		return &response{ID: req.ID, Error: toRPCError(err)}, false
	}
	return &response{ID: req.ID, Result: result}, false
}

// parseRequest checks the envelope of a request that is valid JSON. With
// an error, it returns the request too once its id is known to be valid.
func parseRequest(line []byte) (*request, *Error) {
	line = bytes.TrimSpace(line)
	if len(line) > 0 && line[0] == '[' {
		return nil, newError(CodeInvalidRequest, "invalid request: batches are not supported; send one request object per line", nil)
	}
	var req request
	if err := json.Unmarshal(line, &req); err != nil || line[0] != '{' {
		return nil, newError(CodeInvalidRequest, "invalid request: want a JSON-RPC 2.0 request object", nil)
	}
	if req.ID != nil && !validID(req.ID) {
		return nil, newError(CodeInvalidRequest, "invalid request: id must be a string, a number or null", &ErrorData{Field: "id"})
	}
	if req.JSONRPC != "2.0" {
		return &req, newError(CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`, &ErrorData{Field: "jsonrpc"})
	}
	if req.Method == "" {
		return &req, newError(CodeInvalidRequest, `invalid request: "method" is missing`, &ErrorData{Field: "method"})
	}
	return &req, nil
}

func validID(id json.RawMessage) bool {
	switch id[0] {
	case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// call runs the method, once the handshake allows it.
func (s *session) call(req *request) (any, error) {
	m, ok := methods[req.Method]
	if !ok {
		return nil, newError(CodeMethodNotFound, fmt.Sprintf("method not found: %q", req.Method), &ErrorData{Field: "method"})
	}
	if !s.greeted && req.Method != "get_version" {
		return nil, newError(CodeHandshakeRequired, "handshake required: call get_version first on each connection", nil)
	}
	result, err := m.call(s, req.Params)
	if m.changes {
		log := s.api.log.WithField("method", req.Method)
		var re *Error
		switch {
		case errors.As(err, &re) && re.Code == CodeAppliedInPart:
			log.WithError(err).Error("admin change applied in part: the items named were left out")
		case err != nil:
			log.WithError(err).Warn("admin change refused")
		default:
			log.Info("admin change applied")
		}
	}
	return result, err
}
