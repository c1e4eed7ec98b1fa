package apiserver

import (
	"context"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store"
)

// ListJobHistory lists every user's jobs created since req.since, oldest
// first, for a replay of the history (falcon sim --from-db). Admins only
// (the rules table): it shows everyone's jobs. A job's task spec is cut to
// what a replay reads (accelerator, topology, hosts, slices, supply mode), and the
// Message dropped: the commands, images and environments of other
// people's jobs are none of the simulator's business. The placement record
// stays: it tells a job pinned to its cluster from one selection sent
// there.
func (s *Server) ListJobHistory(ctx context.Context, req *falconv1.ListJobHistoryRequest) (*falconv1.ListJobsResponse, error) {
	if req.GetSince() == nil {
		return nil, errdefs.Invalid("since", "is required: the time from which jobs are listed")
	}
	if err := req.GetSince().CheckValid(); err != nil {
		return nil, errdefs.Invalid("since", "%v", err)
	}
	size, err := pageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	items, next, err := s.store.ListJobs(ctx, store.JobFilter{
		Page:         store.Page{Size: size, Token: req.GetPageToken()},
		CreatedSince: req.GetSince().AsTime(),
	})
	if err != nil {
		return nil, err
	}
	resp := &falconv1.ListJobsResponse{NextPageToken: next, Items: make([]*falconv1.Job, 0, len(items))}
	for _, j := range items {
		out := jobToAPI(j)
		ts := out.GetTaskSpec()
		out.TaskSpec = &falconv1.TaskSpec{Replica: ts.GetReplica(), DeviceCount: ts.GetDeviceCount(), DeviceType: ts.GetDeviceType(),
			DeviceTopo: ts.GetDeviceTopo(), SupplyMode: ts.GetSupplyMode(), Slices: ts.GetSlices()}
		out.Message = ""
		resp.Items = append(resp.Items, out)
	}
	return resp, nil
}
