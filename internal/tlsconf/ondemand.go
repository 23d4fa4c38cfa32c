package tlsconf

import "crypto/tls"

// OnDemand gets a certificate for a handshake's name at that handshake
// (ACME on demand, *acme.Demand's Certificate): nil when there is none
// to be had. It may block, bounded, while one is ordered.
type OnDemand func(hello *tls.ClientHelloInfo) *tls.Certificate

// SetOnDemand makes f the source of certificates for names that neither
// a file's certificate nor a managed one covers; nil sets none. It
// applies only beside managed certificates (NewManagedServer).
func (s *Server) SetOnDemand(f OnDemand) {
	if f == nil {
		s.onDemand.Store(nil)
		return
	}
	s.onDemand.Store(&f)
}

// demanded is the certificate on demand for hello, or nil.
func (s *Server) demanded(hello *tls.ClientHelloInfo) *tls.Certificate {
	if f := s.onDemand.Load(); f != nil {
		return (*f)(hello)
	}
	return nil
}
