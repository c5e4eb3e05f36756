package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The operator sets these in each of the two containers of a hot upgrade.
const (
	versionEnv    = "SIDECARSET_VERSION"
	altVersionEnv = "SIDECARSET_VERSION_ALT"
)

// controlSlack is how much longer than the shutdown timeout a control
// socket exchange may take: a release lets requests in flight finish first.
const controlSlack = 5 * time.Second

// maxPassed bounds the listening sockets one answer passes on: each
// upgrade adds the successor's own.
const maxPassed = 64

// handoff is what a serving exporter in the handoff mode knows and shares
// with its control socket.
type handoff struct {
	// version is this container's, alt the other's when this one started.
	version, alt int
	dir          string
	servingFile  string
	// timeout bounds one control socket exchange.
	timeout time.Duration
	// releases carries each release request to serve, with where to
	// answer.
	releases chan chan<- answer
}

// answer is the answer to a release request.
type answer struct {
	line string
	// sockets are the listening sockets the exporter no longer accepts on,
	// for the successor to accept on: a listening socket that closes
	// resets the connections queued on it, and the port's sockets share
	// the new connections between them.
	sockets []*os.File
}

// envVersion reads a version the operator set: a non-negative integer, 0
// when missing or anything else.
func envVersion(getenv func(string) string, name string, log *slog.Logger) int {
	s := getenv(name)
	if s == "" {
		return 0
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		log.Warn("not a version, taking 0", "env", name, "value", s)
		return 0
	}
	return v
}

// runHandoff is run in the handoff mode; the usage text says what it does.
func runHandoff(ctx context.Context, cfg config, getenv func(string) string, log *slog.Logger) error {
	h := &handoff{
		version:     envVersion(getenv, versionEnv, log),
		alt:         envVersion(getenv, altVersionEnv, log),
		dir:         cfg.handoffDir,
		servingFile: cfg.servingFile,
		timeout:     cfg.shutdownTimeout + controlSlack,
		releases:    make(chan chan<- answer),
	}
	if h.alt > 0 && h.version < h.alt {
		// The old version restarted while the new one takes over: the
		// port is the new one's.
		log.Info("not serving: the other container runs a newer version", "version", h.version, "other", h.alt)
		<-ctx.Done()
		log.Info("stopped", "cause", context.Cause(ctx).Error())
		return nil
	}
	path := h.socket(h.version)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the stale control socket: %w", err)
	}
	ctl, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("listen on the control socket: %w", err)
	}
	// Closing it removes the file.
	defer ctl.Close()
	ln, err := listenReusePort(ctx, cfg.listen)
	if err != nil {
		return fmt.Errorf("listen on %s with SO_REUSEPORT: %w", cfg.listen, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go h.control(cctx, ctl, log)
	return newExporter(cfg.version, time.Now).serve(ctx, ln, cfg, h, log)
}

func (h *handoff) successor() bool { return h.alt > 0 && h.version > h.alt }

// socket is the control socket of the exporter of version v.
func (h *handoff) socket(v int) string {
	return filepath.Join(h.dir, fmt.Sprintf("exporter-%d.sock", v))
}

// listenReusePort listens with SO_REUSEPORT, so that the successor can
// bind the port while its predecessor still listens.
func listenReusePort(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	return lc.Listen(ctx, "tcp", addr)
}

// releasePredecessor runs once a successor serves: it releases the
// predecessor and returns the listening sockets it passed on.
func (h *handoff) releasePredecessor(ctx context.Context, log *slog.Logger) []net.Listener {
	if !h.successor() {
		return nil
	}
	path := h.socket(h.alt)
	sockets, err := askRelease(ctx, path, h.timeout)
	if err != nil {
		// A predecessor that crashed has no one to answer: go on.
		log.Warn("the predecessor did not release", "predecessor", h.alt, "socket", path, "err", err)
	}
	return sockets
}

// markServing makes the serving mark, unless the exporter is stopping
// already; adopted is how many sockets the predecessor passed on.
func (h *handoff) markServing(ctx context.Context, adopted int, log *slog.Logger) {
	if ctx.Err() != nil {
		return
	}
	if err := os.WriteFile(h.servingFile, nil, 0o644); err != nil {
		// It serves all the same: the predecessor may be gone.
		log.Error("make the serving mark", "err", err)
		return
	}
	if h.successor() {
		log.Info("took over", "version", h.version, "predecessor", h.alt, "sockets", adopted)
	}
}

// askRelease sends "release" to the control socket at path, waits for
// "released", and returns the listening sockets passed with the answer.
func askRelease(ctx context.Context, path string, timeout time.Duration) ([]net.Listener, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	conn := c.(*net.UnixConn)
	defer conn.Close()
	// Closing the connection when ctx ends is what bounds the exchange.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if _, err := conn.Write([]byte("release\n")); err != nil {
		return nil, fmt.Errorf("send release: %w", cmp.Or(ctx.Err(), err))
	}
	var line []byte
	var sockets []net.Listener
	buf, oob := make([]byte, 64), make([]byte, unix.CmsgSpace(maxPassed*4))
	for !bytes.HasSuffix(line, []byte("\n")) {
		n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		line = append(line, buf[:n]...)
		ls, aerr := adopt(oob[:oobn])
		sockets = append(sockets, ls...)
		if err = errors.Join(err, aerr); err != nil {
			return sockets, fmt.Errorf("read the answer: %w", cmp.Or(ctx.Err(), err))
		}
	}
	if string(line) != "released\n" {
		return sockets, fmt.Errorf("answer %q, want \"released\"", bytes.TrimSuffix(line, []byte("\n")))
	}
	return sockets, nil
}

// adopt makes listeners of the sockets passed in the control messages.
func adopt(oob []byte) ([]net.Listener, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("parse the passed sockets: %w", err)
	}
	var ls []net.Listener
	var errs []error
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			errs = append(errs, fmt.Errorf("parse the passed sockets: %w", err))
			continue
		}
		for _, fd := range fds {
			f := os.NewFile(uintptr(fd), "passed socket")
			l, err := net.FileListener(f)
			// The listener holds a copy of its own.
			f.Close()
			if err != nil {
				errs = append(errs, fmt.Errorf("listen on a passed socket: %w", err))
				continue
			}
			ls = append(ls, l)
		}
	}
	return ls, errors.Join(errs...)
}

// control answers the clients of the control socket until ln closes.
func (h *handoff) control(ctx context.Context, ln *net.UnixListener, log *slog.Logger) {
	for {
		conn, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		go h.answer(ctx, conn, log)
	}
}

// answer answers one client: "release" goes to serve, anything else is an
// error.
func (h *handoff) answer(ctx context.Context, conn *net.UnixConn, log *slog.Logger) {
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(h.timeout)); err != nil {
		log.Warn("control socket", "err", err)
		return
	}
	// The request is one short line.
	req, err := bufio.NewReader(io.LimitReader(conn, 64)).ReadString('\n')
	if err != nil {
		log.Warn("control socket: read the request", "err", err)
		return
	}
	if req != "release\n" {
		fmt.Fprintf(conn, "error: unknown request %q, want \"release\"\n", strings.TrimSuffix(req, "\n"))
		return
	}
	reply := make(chan answer, 1)
	select {
	case h.releases <- reply:
	case <-ctx.Done():
		fmt.Fprintln(conn, "error: stopping")
		return
	}
	a := <-reply
	var fds []int
	for _, f := range a.sockets {
		// Fd makes the socket blocking; nothing here accepts on it any
		// more, and the successor's FileListener makes it non-blocking.
		fds = append(fds, int(f.Fd()))
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := conn.WriteMsgUnix([]byte(a.line+"\n"), oob, nil); err != nil {
		log.Error("control socket: answer", "answer", a.line, "err", err)
	}
	// Sent or not, they are the successor's now.
	for _, f := range a.sockets {
		f.Close()
	}
}

// release stops serving for a successor that serves the port already: no
// new connections, requests in flight finished, not ready. The answer
// passes the listening sockets on.
func (e *exporter) release(srv *http.Server, listeners []net.Listener, accepting *sync.WaitGroup, cfg config, h *handoff, log *slog.Logger) answer {
	start := e.now()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	var sockets []*os.File
	for _, l := range listeners {
		// A copy keeps the socket, and the connections queued on it, once
		// l closes.
		f, err := l.(*net.TCPListener).File()
		if err != nil {
			log.Error("copy a listening socket to pass on", "address", l.Addr().String(), "err", err)
		} else {
			sockets = append(sockets, f)
		}
		l.Close()
	}
	// Shutdown would drop the request of a connection it finds before the
	// request is read: it stops only once every connection accepted has
	// been counted and has sent its first request.
	accepting.Wait()
	for e.unreadConns() > 0 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	err := srv.Shutdown(ctx)
	e.notReady(h, log)
	if err != nil {
		log.Error("released, with requests still in flight", "timeout", cfg.shutdownTimeout.String(), "err", err)
		return answer{fmt.Sprintf("error: requests still in flight %v after the release", cfg.shutdownTimeout), sockets}
	}
	log.Info("released, requests in flight finished", "sockets", len(sockets), "took", e.now().Sub(start).String())
	return answer{"released", sockets}
}

// trackUnread is the server's ConnState hook in the handoff mode: a
// connection's first request is read when it leaves StateNew.
func (e *exporter) trackUnread(c net.Conn, s http.ConnState) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s == http.StateNew {
		e.unread[c] = struct{}{}
	} else {
		delete(e.unread, c)
	}
}

func (e *exporter) unreadConns() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.unread)
}
