package dataplane

import (
	"relay/internal/config"
	"relay/internal/ratelimit"
	"relay/internal/supervisor"
)

// NewForProcess builds the data plane of serving process p, which runs
// cfg, as New does with opts, and sets what the process decides of it:
//
//   - with several processes each enforces its part of every request cap
//     (supervisor.Share), so relay as a whole never exceeds it;
//   - every process carries the control's instance id in its Via entry,
//     so a request that comes back to any of them is known, and makes
//     sticky cookies with the control's key, so a cookie one process set
//     is honoured by the others (p.Config);
//   - rate limits' buckets are in the memory the processes all map, when
//     the supervisor handed one over (p.Shared).
func NewForProcess(cfg *config.Config, p *supervisor.Process, opts Options) (*Plane, error) {
	procs := supervisor.ProcessCount(cfg)
	opts.Share = func(n int) int { return supervisor.Share(n, procs, p.Index) }
	opts.Instance, opts.StickyKey = p.Config.Instance, p.Config.StickyKey
	if p.Shared != nil {
		table, err := ratelimit.OpenShared(p.Shared)
		if err != nil {
			return nil, err
		}
		opts.RateTable = table
	}
	return New(cfg, opts)
}
