package supervisor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// maxMessage bounds one message; a configuration file is the largest.
const maxMessage = 16 << 20

// Channel carries Messages both ways between the supervisor and one serving
// process: one JSON object per line, so the stream is easy to read in a
// trace and a new field is ignored by an older reader. Send may be called
// from several goroutines; Recv from one.
type Channel struct {
	rw io.ReadWriteCloser
	br *bufio.Reader
	mu sync.Mutex // serialises Send
}

// NewChannel returns a channel over rw, a socket pair's end.
func NewChannel(rw io.ReadWriteCloser) *Channel {
	return &Channel{rw: rw, br: bufio.NewReaderSize(rw, 4<<10)}
}

// Send writes m whole.
func (c *Channel) Send(m Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encoding %q message: %w", m.Kind, err)
	}
	b = append(b, '\n')
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err = c.rw.Write(b)
	return err
}

// Recv reads the next message. A malformed one is an error that says what
// was wrong; io.EOF means the other side closed the channel.
func (c *Channel) Recv() (Message, error) {
	var line []byte
	for {
		chunk, err := c.br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > maxMessage {
			return Message{}, fmt.Errorf("message longer than %d bytes", maxMessage)
		}
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == io.EOF && len(line) > 0 {
			return Message{}, fmt.Errorf("channel closed inside a message (%d bytes)", len(line))
		}
		return Message{}, err
	}
	var m Message
	if err := json.Unmarshal(bytes.TrimSpace(line), &m); err != nil {
		// Not quoted: a message may carry session-ticket keys, and
		// the error goes to the log.
		return Message{}, fmt.Errorf("malformed message of %d bytes: %w", len(line), err)
	}
	if err := m.validate(); err != nil {
		return Message{}, err
	}
	return m, nil
}

// Close closes the channel; a Recv on either side then ends.
func (c *Channel) Close() error { return c.rw.Close() }

// NewPair makes a channel between this process and another: mine is this
// side, theirs the descriptor the other process inherits (or this process
// opens with net.FileConn, when one process serves).
func NewPair() (mine *Channel, theirs *os.File, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return nil, nil, err
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	own, theirs := os.NewFile(uintptr(fds[0]), "channel"), os.NewFile(uintptr(fds[1]), "channel")
	conn, err := net.FileConn(own)
	own.Close()
	if err != nil {
		theirs.Close()
		return nil, nil, err
	}
	return NewChannel(conn), theirs, nil
}
