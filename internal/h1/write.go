package h1

import "strconv"

// AppendRequestLine appends "METHOD TARGET HTTP/1.1\r\n". relay always
// speaks HTTP/1.1 to backends.
func AppendRequestLine(dst, method, target []byte) []byte {
	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, target...)
	return append(dst, " HTTP/1.1\r\n"...)
}

// AppendStatusLine appends "HTTP/1.1 CODE REASON\r\n". An empty reason is
// replaced by the standard one.
func AppendStatusLine(dst []byte, code int, reason []byte) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, ' ')
	if len(reason) == 0 {
		dst = append(dst, StatusText(code)...)
	} else {
		dst = append(dst, reason...)
	}
	return append(dst, '\r', '\n')
}

// AppendField appends "name: value\r\n".
func AppendField(dst, name, value []byte) []byte {
	dst = append(dst, name...)
	dst = append(dst, ':', ' ')
	dst = append(dst, value...)
	return append(dst, '\r', '\n')
}

// AppendFieldString is AppendField for string arguments.
func AppendFieldString(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	dst = append(dst, ':', ' ')
	dst = append(dst, value...)
	return append(dst, '\r', '\n')
}

// AppendContentLength appends a Content-Length field.
func AppendContentLength(dst []byte, n int64) []byte {
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, '\r', '\n')
}

// AppendForwardFields appends every field not marked Hop.
func AppendForwardFields(dst []byte, fields []Field) []byte {
	for i := range fields {
		if !fields[i].Hop {
			dst = AppendField(dst, fields[i].Name, fields[i].Value)
		}
	}
	return dst
}

// StatusText returns the reason phrase for the status codes relay sends.
func StatusText(code int) string {
	switch code {
	case 100:
		return "Continue"
	case 101:
		return "Switching Protocols"
	case 200:
		return "OK"
	case 204:
		return "No Content"
	case 301:
		return "Moved Permanently"
	case 302:
		return "Found"
	case 303:
		return "See Other"
	case 304:
		return "Not Modified"
	case 307:
		return "Temporary Redirect"
	case 308:
		return "Permanent Redirect"
	case 400:
		return "Bad Request"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 408:
		return "Request Timeout"
	case 411:
		return "Length Required"
	case 412:
		return "Precondition Failed"
	case 413:
		return "Content Too Large"
	case 414:
		return "URI Too Long"
	case 417:
		return "Expectation Failed"
	case 421:
		return "Misdirected Request"
	case 425:
		return "Too Early"
	case 429:
		return "Too Many Requests"
	case 431:
		return "Request Header Fields Too Large"
	case 500:
		return "Internal Server Error"
	case 501:
		return "Not Implemented"
	case 502:
		return "Bad Gateway"
	case 503:
		return "Service Unavailable"
	case 504:
		return "Gateway Timeout"
	case 505:
		return "HTTP Version Not Supported"
	case 508:
		return "Loop Detected"
	}
	return "Status " + strconv.Itoa(code)
}
