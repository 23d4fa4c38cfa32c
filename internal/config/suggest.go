package config

// suggest returns the known key closest to name when it is close enough to
// be a typo, or "".
func suggest(name string, known []string) string {
	best, bestDist := "", max(2, len(name)/3)+1
	for _, k := range known {
		if d := editDistance(name, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance counts the single-byte insertions, deletions, substitutions
// and swaps of neighbours that turn a into b (optimal string alignment), so
// "prot" is one edit from "port". Inputs are cut at 64 bytes: a key that long
// is no typo of anything relay knows, and the cut bounds the work.
func editDistance(a, b string) int {
	const limit = 64
	a, b = a[:min(len(a), limit)], b[:min(len(b), limit)]
	// Three rows: the one being filled and the two before it, for swaps.
	pp := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], pp[j-2]+1)
			}
		}
		pp, prev, cur = prev, cur, pp
	}
	return prev[len(b)]
}
