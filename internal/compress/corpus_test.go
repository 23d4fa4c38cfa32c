package compress

import (
	"bytes"
	"math/rand/v2"
	"strconv"
)

// The bodies the tests compress, made here rather than kept in testdata:
// text with the repetition real pages and API answers have (markup,
// keys, a vocabulary) and the variety that keeps it from compressing to
// nothing (numbers, word order), the same bytes on every run.

var words = []string{
	"relay", "backend", "pool", "request", "response", "header", "stream",
	"client", "server", "route", "latency", "balance", "health", "check",
	"window", "buffer", "encoder", "content", "the", "of", "and", "to", "a",
	"in", "is", "that", "for", "it", "with", "as", "on", "by", "this", "be",
	"connection", "timeout", "retry", "budget", "breaker", "weight", "queue",
}

func sentence(r *rand.Rand, n int) string {
	var b bytes.Buffer
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}

// htmlBody returns about n bytes of an HTML page.
func htmlBody(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>relay status</title>\n<link rel=\"stylesheet\" href=\"/static/site.css\">\n</head>\n<body>\n<main class=\"content\">\n")
	for i := 0; b.Len() < n-40; i++ {
		switch i % 4 {
		case 0:
			b.WriteString("<h2 id=\"section-" + strconv.Itoa(i) + "\">" + sentence(r, 3+r.IntN(4)) + "</h2>\n")
		case 1, 2:
			b.WriteString("<p class=\"text\">" + sentence(r, 20+r.IntN(40)) + " <a href=\"/docs/" + words[r.IntN(len(words))] + ".html#" + strconv.Itoa(r.IntN(1000)) + "\">more</a></p>\n")
		case 3:
			b.WriteString("<ul class=\"list\">\n")
			for range 3 + r.IntN(5) {
				b.WriteString("  <li><span class=\"name\">" + sentence(r, 2) + "</span> <span class=\"value\">" + strconv.Itoa(r.IntN(100000)) + "</span></li>\n")
			}
			b.WriteString("</ul>\n")
		}
	}
	b.WriteString("</main>\n</body>\n</html>\n")
	return b.Bytes()
}

// jsonBody returns about n bytes of a JSON array of records.
func jsonBody(n int) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	var b bytes.Buffer
	b.WriteString("[")
	for i := 0; b.Len() < n-200; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		b.WriteString(`{"id":` + strconv.Itoa(100000+i) +
			`,"name":"` + sentence(r, 2) +
			`","address":"10.` + strconv.Itoa(r.IntN(256)) + "." + strconv.Itoa(r.IntN(256)) + "." + strconv.Itoa(r.IntN(256)) + `:8080"` +
			`,"healthy":` + strconv.FormatBool(r.IntN(10) > 0) +
			`,"weight":` + strconv.Itoa(1+r.IntN(100)) +
			`,"latency_ms":` + strconv.FormatFloat(r.Float64()*50, 'f', 3, 64) +
			`,"tags":["` + words[r.IntN(len(words))] + `","` + words[r.IntN(len(words))] + `"]` +
			`,"note":"` + sentence(r, 5+r.IntN(10)) + `"}`)
	}
	b.WriteString("]\n")
	return b.Bytes()
}
